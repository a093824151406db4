// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

interface IERC20Like {
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

/// @title DevSwapRouter: the dev bundle's swap venue, priced from the seed's USD prices.
/// @notice It pays out of its own reserves at fixed prices set by its deployer. The zero
/// address stands for the chain's native asset. A sold token is pulled with transferFrom,
/// so the seller approves the router first (the trade's APPROVE leg).
contract DevSwapRouter {
    address public immutable owner;
    /// USD per whole unit, times 1e8.
    mapping(address => uint256) public priceE8;
    mapping(address => uint8) public decimalsOf;

    event Swapped(address indexed account, address sellToken, address buyToken, uint256 amountIn, uint256 amountOut);

    constructor() {
        owner = msg.sender;
    }

    receive() external payable {}

    function setPrice(address token, uint256 usdE8, uint8 tokenDecimals) external {
        require(msg.sender == owner, "DevSwapRouter: only the deployer prices");
        priceE8[token] = usdE8;
        decimalsOf[token] = tokenDecimals;
    }

    function quote(address sellToken, address buyToken, uint256 amountIn) public view returns (uint256) {
        require(priceE8[sellToken] > 0 && priceE8[buyToken] > 0, "DevSwapRouter: unpriced asset");
        return amountIn * priceE8[sellToken] * 10 ** decimalsOf[buyToken]
            / (priceE8[buyToken] * 10 ** decimalsOf[sellToken]);
    }

    function swapExactInput(address sellToken, address buyToken, uint256 amountIn, uint256 minAmountOut, address recipient)
        external
        payable
        returns (uint256 amountOut)
    {
        amountOut = quote(sellToken, buyToken, amountIn);
        require(amountOut >= minAmountOut, "DevSwapRouter: output below the slippage limit");
        if (sellToken == address(0)) {
            require(msg.value == amountIn, "DevSwapRouter: value differs from amountIn");
        } else {
            require(msg.value == 0, "DevSwapRouter: value sent with a token sale");
            require(IERC20Like(sellToken).transferFrom(msg.sender, address(this), amountIn), "DevSwapRouter: pull failed");
        }
        if (buyToken == address(0)) {
            (bool ok,) = recipient.call{value: amountOut}("");
            require(ok, "DevSwapRouter: native payout failed");
        } else {
            require(IERC20Like(buyToken).transfer(recipient, amountOut), "DevSwapRouter: payout failed");
        }
        emit Swapped(msg.sender, sellToken, buyToken, amountIn, amountOut);
    }
}
