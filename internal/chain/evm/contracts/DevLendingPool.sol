// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

interface IERC20Lent {
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

/// @title DevLendingPool: the dev bundle's Borrow venue, with the signatures of Aave v3's
/// Pool.borrow and Pool.repay.
/// @notice It lends out of its own reserves and records debt per account and asset; it
/// checks no collateral (development only). repay pulls the asset with transferFrom: the
/// borrower has approved the pool. Repaying more than the debt takes only the debt. The
/// deployer may record loans opened before the chain's history (the demo wallets' own).
contract DevLendingPool {
    address public immutable owner;
    mapping(address => mapping(address => uint256)) public debtOf;

    event Borrow(address indexed asset, address indexed onBehalfOf, uint256 amount);
    event Repay(address indexed asset, address indexed onBehalfOf, uint256 amount);

    constructor() {
        owner = msg.sender;
    }

    function openLoan(address account, address asset, uint256 amount) external {
        require(msg.sender == owner, "DevLendingPool: only the deployer records loans");
        debtOf[account][asset] += amount;
        emit Borrow(asset, account, amount);
    }

    function borrow(address asset, uint256 amount, uint256, uint16, address onBehalfOf) external {
        require(onBehalfOf == msg.sender, "DevLendingPool: borrow for yourself");
        require(amount > 0, "DevLendingPool: nothing to borrow");
        debtOf[onBehalfOf][asset] += amount;
        require(IERC20Lent(asset).transfer(msg.sender, amount), "DevLendingPool: reserves too low");
        emit Borrow(asset, onBehalfOf, amount);
    }

    function repay(address asset, uint256 amount, uint256, address onBehalfOf) external returns (uint256 repaid) {
        uint256 debt = debtOf[onBehalfOf][asset];
        repaid = amount < debt ? amount : debt;
        require(repaid > 0, "DevLendingPool: no debt to repay");
        debtOf[onBehalfOf][asset] = debt - repaid;
        require(IERC20Lent(asset).transferFrom(msg.sender, address(this), repaid), "DevLendingPool: pull failed");
        emit Repay(asset, onBehalfOf, repaid);
    }
}
