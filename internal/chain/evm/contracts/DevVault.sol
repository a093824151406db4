// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

interface IERC20Vaulted {
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

/// @title DevVault: the dev bundle's Earn venue, the ERC-4626 calls a deposit and a
/// withdrawal make, over one ERC-20 asset.
/// @notice Shares are 1:1 with assets (no yield accrues in development). claimRewards pays
/// what the deployer credited, none by default. deposit pulls the asset with transferFrom:
/// the depositor has approved the vault.
contract DevVault {
    address public immutable asset;
    address public immutable owner;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => uint256) public rewardsOf;

    event Deposit(address indexed sender, address indexed owner, uint256 assets, uint256 shares);
    event Withdraw(address indexed sender, address indexed receiver, address indexed owner, uint256 assets, uint256 shares);
    event RewardsClaimed(address indexed account, address indexed to, uint256 amount);

    constructor(address asset_) {
        asset = asset_;
        owner = msg.sender;
    }

    function totalAssets() external view returns (uint256) {
        return totalSupply;
    }

    function convertToShares(uint256 assets) external pure returns (uint256) {
        return assets;
    }

    function convertToAssets(uint256 shares) external pure returns (uint256) {
        return shares;
    }

    function maxWithdraw(address owner_) external view returns (uint256) {
        return balanceOf[owner_];
    }

    function deposit(uint256 assets, address receiver) external returns (uint256 shares) {
        require(assets > 0, "DevVault: nothing to deposit");
        require(IERC20Vaulted(asset).transferFrom(msg.sender, address(this), assets), "DevVault: pull failed");
        shares = assets;
        totalSupply += shares;
        balanceOf[receiver] += shares;
        emit Deposit(msg.sender, receiver, assets, shares);
    }

    function withdraw(uint256 assets, address receiver, address owner_) external returns (uint256 shares) {
        require(msg.sender == owner_, "DevVault: only the owner withdraws");
        require(balanceOf[owner_] >= assets, "DevVault: withdrawal above the balance");
        shares = assets;
        balanceOf[owner_] -= shares;
        totalSupply -= shares;
        require(IERC20Vaulted(asset).transfer(receiver, assets), "DevVault: payout failed");
        emit Withdraw(msg.sender, receiver, owner_, assets, shares);
    }

    function creditRewards(address account, uint256 amount) external {
        require(msg.sender == owner, "DevVault: only the deployer credits");
        rewardsOf[account] += amount;
    }

    function claimRewards(address to) external returns (uint256 amount) {
        amount = rewardsOf[msg.sender];
        rewardsOf[msg.sender] = 0;
        if (amount > 0) {
            require(IERC20Vaulted(asset).transfer(to, amount), "DevVault: payout failed");
        }
        emit RewardsClaimed(msg.sender, to, amount);
    }
}
