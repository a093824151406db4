package devevm

import (
	"context"
	"crypto/ecdsa"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/ethclient"
	gethlog "github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
)

// Dead is the address whose transfers revert on the dev chains (SPEC 3.6): the token
// refuses it, and DevRevert's code sits there from genesis for native transfers.
var Dead = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// FaucetKey is the dev chains' deployer and faucet: the same key on every dev chain, funded
// from genesis, so a chain re-created from nothing is the same chain.
func FaucetKey() *ecdsa.PrivateKey {
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("treasury dev chain faucet")))
	if err != nil {
		panic(err)
	}
	return k
}

// Genesis is a dev chain's first block: every fork active, the faucet funded, DevRevert
// at 0x…dEaD. It depends on the chain id only, so a restart finds the same chain.
func Genesis(chainID uint64) *core.Genesis {
	cfg := *params.AllDevChainProtocolChanges
	cfg.ChainID = new(big.Int).SetUint64(chainID)
	alloc := core.SystemContractAllocs()
	alloc[crypto.PubkeyToAddress(FaucetKey().PublicKey)] = types.Account{Balance: new(big.Int).Mul(big.NewInt(params.Ether), big.NewInt(1e12))}
	alloc[Dead] = types.Account{Code: contracts.RevertRuntime(), Balance: new(big.Int)}
	return &core.Genesis{Config: &cfg, GasLimit: ethconfig.Defaults.Miner.GasCeil, Alloc: alloc, BaseFee: big.NewInt(params.InitialBaseFee)}
}

// Node is a go-ethereum node running in this process with a simulated consensus layer: a
// real EVM, state, transaction pool and JSON-RPC, on one machine. It keeps its chain in a
// directory, so a restart resumes it.
type Node struct {
	stack  *node.Node
	eth    *eth.Ethereum
	beacon *catalyst.SimulatedBeacon
	client *ethclient.Client
	rpc    *rpc.Client
	// mu keeps sealing to one block at a time.
	mu       sync.Mutex
	stop     chan struct{}
	finished chan struct{}
}

// NodeOptions configure a dev chain's node.
type NodeOptions struct {
	// Dir keeps the chain; empty keeps it in memory.
	Dir     string
	ChainID uint64
	// BlockTime is how often a block is sealed while transactions wait (or while the last
	// ones still need Confirmations blocks on top). An idle chain seals nothing.
	BlockTime     time.Duration
	Confirmations int
	// HTTPPort, when not zero, also serves the node's JSON-RPC on 127.0.0.1 at that port,
	// for processes of their own.
	HTTPPort int
	Log      *slog.Logger
}

var setLogOnce sync.Once

// StartNode starts a dev chain's node and its block loop.
func StartNode(o NodeOptions) (*Node, error) {
	if o.Log != nil {
		setLogOnce.Do(func() { gethlog.SetDefault(gethlog.NewLogger(errorsOnly{o.Log.Handler()})) })
	}
	cfg := &node.Config{Name: "treasury-devchain", DataDir: o.Dir,
		P2P: p2p.Config{NoDiscovery: true, MaxPeers: 0, ListenAddr: ""}}
	if o.HTTPPort != 0 {
		cfg.HTTPHost, cfg.HTTPPort, cfg.HTTPModules = "127.0.0.1", o.HTTPPort, []string{"eth", "net", "web3"}
	}
	stack, err := node.New(cfg)
	if err != nil {
		return nil, err
	}
	ethCfg := ethconfig.Defaults
	ethCfg.Genesis = Genesis(o.ChainID)
	ethCfg.NetworkId = o.ChainID
	ethCfg.SyncMode = ethconfig.FullSync
	ethCfg.TxPool.NoLocals = true
	ethCfg.TxPool.Journal = ""
	// A dev chain carries a whole crowd of orders from its few seeded wallets, sent out of
	// nonce order by concurrent workflows: a public node's pool (64 future transactions an
	// account, 1,024 in all) would drop most of them. A node serving busy wallets is
	// configured alike (geth's --txpool.accountqueue, --txpool.globalqueue, docs/chains.md).
	ethCfg.TxPool.AccountQueue, ethCfg.TxPool.GlobalQueue = 1<<15, 1<<16
	ethCfg.TxPool.GlobalSlots = 1 << 16
	// Every block's state is written to disk as it is sealed (an archive on the hash
	// scheme) and Mine flushes it, so a bundle killed without a shutdown resumes at its
	// last block rather than at the last state flushed at a clean stop. A dev chain is
	// small enough.
	ethCfg.StateScheme, ethCfg.NoPruning = rawdb.HashScheme, true
	backend, err := eth.New(stack, &ethCfg)
	if err != nil {
		_ = stack.Close()
		return nil, err
	}
	fs := filters.NewFilterSystem(backend.APIBackend, filters.Config{})
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(fs)}})
	if err := stack.Start(); err != nil {
		_ = stack.Close()
		return nil, err
	}
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, backend)
	if err != nil {
		_ = stack.Close()
		return nil, err
	}
	if err := beacon.Start(); err != nil {
		_ = stack.Close()
		return nil, err
	}
	raw := stack.Attach()
	n := &Node{stack: stack, eth: backend, beacon: beacon, client: ethclient.NewClient(raw), rpc: raw,
		stop: make(chan struct{}), finished: make(chan struct{})}
	go n.loop(max(o.BlockTime, 10*time.Millisecond), max(o.Confirmations, 1))
	return n, nil
}

// Client is the node's JSON-RPC client, in process.
func (n *Node) Client() *ethclient.Client { return n.client }

// URL is the node's JSON-RPC endpoint over HTTP, "" unless NodeOptions.HTTPPort set one.
func (n *Node) URL() string {
	if n.stack.Config().HTTPHost == "" {
		return ""
	}
	return n.stack.HTTPEndpoint()
}

// RPC is the node's raw JSON-RPC client, in process.
func (n *Node) RPC() *rpc.Client { return n.rpc }

// Mine seals a block now and flushes it to disk. go-ethereum writes asynchronously and
// expects a real node to re-sync what a crash lost; a dev chain has no peers to re-sync
// from, and a rewound chain would forget transactions whose orders ended Confirmed.
func (n *Node) Mine() {
	n.Seal()
	if err := n.Flush(); err != nil {
		gethlog.Error("devchain: flushing the sealed block", "err", err)
	}
}

// Seal seals a block now without flushing it: for a run of blocks that ends with Flush
// (a deployment, whose record is written only once its blocks are on disk).
func (n *Node) Seal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.beacon.Commit()
}

// Flush writes what the node has sealed to disk.
func (n *Node) Flush() error { return n.eth.ChainDb().SyncKeyValue() }

// loop seals a block every blockTime while transactions wait, and then confirmations
// more, so the last transactions reach their depth.
func (n *Node) loop(blockTime time.Duration, confirmations int) {
	defer close(n.finished)
	t := time.NewTicker(blockTime)
	defer t.Stop()
	owed := 0
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		pending, _ := n.eth.TxPool().Stats()
		if pending == 0 && owed == 0 {
			continue
		}
		n.Mine()
		if pending > 0 {
			owed = confirmations
		} else {
			owed--
		}
	}
}

// Close stops the block loop and the node; the chain stays in its directory.
func (n *Node) Close() error {
	close(n.stop)
	<-n.finished
	n.rpc.Close()
	err := n.beacon.Stop()
	if cerr := n.stack.Close(); err == nil {
		err = cerr
	}
	return err
}

// errorsOnly passes on go-ethereum's errors, not its chatter (a node answering "not found
// yet" to a receipt lookup logs a warning).
type errorsOnly struct{ slog.Handler }

func (w errorsOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && w.Handler.Enabled(ctx, l)
}

func (w errorsOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return errorsOnly{w.Handler.WithAttrs(attrs)}
}

func (w errorsOnly) WithGroup(name string) slog.Handler { return errorsOnly{w.Handler.WithGroup(name)} }
