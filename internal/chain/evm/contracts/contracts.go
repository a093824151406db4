// Package contracts holds the ABIs the EVM adapter calls and the dev contracts' bytecode.
// The Solidity sources are beside them; build.js made the .abi and .bin files (no build
// step compiles Solidity).
package contracts

import (
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

//go:embed *.abi *.bin
var files embed.FS

// The contracts, by name.
const (
	Token       = "DevToken"
	Revert      = "DevRevert"
	SwapRouter  = "DevSwapRouter"
	Vault       = "DevVault"
	LendingPool = "DevLendingPool"
	PriceFeed   = "DevPriceFeed"
	// BatchTransfer pays many recipients in one transaction (batch payments).
	BatchTransfer = "DevBatchTransfer"
)

var abis = map[string]abi.ABI{}

func init() {
	for _, name := range []string{Token, Revert, SwapRouter, Vault, LendingPool, PriceFeed, BatchTransfer} {
		raw, err := files.ReadFile(name + ".abi")
		if err != nil {
			panic(err)
		}
		parsed, err := abi.JSON(strings.NewReader(string(raw)))
		if err != nil {
			panic(fmt.Sprintf("contracts: %s.abi: %v", name, err))
		}
		abis[name] = parsed
	}
}

// ABI returns a contract's ABI. The adapter uses DevToken's as ERC-20's, DevVault's as
// ERC-4626's, DevLendingPool's as Aave v3's Pool (borrow, repay) and DevPriceFeed's as
// Chainlink's AggregatorV3Interface: their functions have those standards' signatures.
func ABI(name string) abi.ABI { return abis[name] }

// Bytecode returns a contract's creation code.
func Bytecode(name string) []byte { return code(name + ".bin") }

// RevertRuntime is DevRevert's deployed code, which the dev chains hold at 0x…dEaD.
func RevertRuntime() []byte { return code(Revert + ".runtime.bin") }

func code(file string) []byte {
	raw, err := files.ReadFile(file)
	if err != nil {
		panic(err)
	}
	code, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		panic(fmt.Sprintf("contracts: %s: %v", file, err))
	}
	return code
}
