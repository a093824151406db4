// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

interface IERC20Pull {
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

/// @title DevBatchTransfer: the dev bundle's batch payment contract.
/// @notice Pays many recipients in one transaction, all or nothing: any transfer that
/// fails reverts the whole batch. A token batch pulls each amount straight from the payer
/// to its recipient with transferFrom, so the payer grants this contract an allowance once;
/// a native batch is sent the total as value and forwards each amount.
contract DevBatchTransfer {
    event BatchPaid(address indexed payer, address indexed token, uint256 recipients, uint256 total);

    function batchTransferToken(address token, address[] calldata to, uint256[] calldata amounts) external {
        require(to.length == amounts.length, "DevBatchTransfer: recipients and amounts differ in length");
        uint256 total;
        for (uint256 i = 0; i < to.length; ++i) {
            require(IERC20Pull(token).transferFrom(msg.sender, to[i], amounts[i]), "DevBatchTransfer: transfer failed");
            total += amounts[i];
        }
        emit BatchPaid(msg.sender, token, to.length, total);
    }

    function batchTransferNative(address[] calldata to, uint256[] calldata amounts) external payable {
        require(to.length == amounts.length, "DevBatchTransfer: recipients and amounts differ in length");
        uint256 total;
        for (uint256 i = 0; i < to.length; ++i) {
            total += amounts[i];
            (bool ok,) = to[i].call{value: amounts[i]}("");
            require(ok, "DevBatchTransfer: native transfer failed");
        }
        require(total == msg.value, "DevBatchTransfer: value differs from the total");
        emit BatchPaid(msg.sender, address(0), to.length, total);
    }
}
