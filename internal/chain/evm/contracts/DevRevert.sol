// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title DevRevert: the code the dev bundle's chains hold at 0x…dEaD.
/// @notice Any native transfer or call to it reverts with a reason, so a payment of the
/// native asset to that address fails as a token transfer to it does (SPEC 3.6).
contract DevRevert {
    receive() external payable {
        revert("DevRevert: transfers to 0x...dEaD always revert");
    }

    fallback() external payable {
        revert("DevRevert: transfers to 0x...dEaD always revert");
    }
}
