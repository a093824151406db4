package gethe2e

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/opentreasury/treasury/dev/freeport"
)

// gethNode is `geth --dev` running as a process of its own.
type gethNode struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
	// faucet is the developer account's key, which geth's genesis funds.
	faucet *ecdsa.PrivateKey
}

// startGeth runs geth in dev mode in dir (a block every second, JSON-RPC over HTTP on a
// free loopback port, no peers), waits until it answers, and reads its developer key.
func startGeth(ctx context.Context, bin, dir string) (*gethNode, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freeport.OrFree("127.0.0.1", 0)
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "geth.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--dev", "--dev.period", "1", "--datadir", dir, "--ipcdisable",
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(port), "--http.api", "eth,net,web3")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("geth: %w", err)
	}
	n := &gethNode{url: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd,
		exited: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); close(n.exited) }()
	if err := n.waitServing(ctx, time.Minute); err != nil {
		return n, err
	}
	if n.faucet, err = developerKey(filepath.Join(dir, "keystore")); err != nil {
		return n, err
	}
	return n, n.checkFunded(ctx)
}

// waitServing waits until geth answers eth_chainId with the dev chain's 1337.
func (n *gethNode) waitServing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-n.exited:
			return fmt.Errorf("geth exited at start (see %s)", n.log.Name())
		default:
		}
		id, err := chainID(ctx, n.url)
		if err == nil && id == 1337 {
			return nil
		}
		if err == nil {
			return fmt.Errorf("geth --dev serves chain id %d, not 1337", id)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("geth not serving JSON-RPC within %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func chainID(ctx context.Context, url string) (uint64, error) {
	c, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	id, err := c.ChainID(callCtx)
	if err != nil {
		return 0, err
	}
	return id.Uint64(), nil
}

// developerKey decrypts the developer account geth keeps in its keystore: in dev mode the
// account is imported there with an empty password (no --password given).
func developerKey(keystoreDir string) (*ecdsa.PrivateKey, error) {
	files, err := filepath.Glob(filepath.Join(keystoreDir, "UTC--*"))
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		return nil, fmt.Errorf("geth's keystore %s holds %d accounts, want its one developer account", keystoreDir, len(files))
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	key, err := keystore.DecryptKey(raw, "")
	if err != nil {
		return nil, fmt.Errorf("decrypting geth's developer key: %w", err)
	}
	return key.PrivateKey, nil
}

// checkFunded makes sure the key is the account geth's genesis funded.
func (n *gethNode) checkFunded(ctx context.Context) error {
	c, err := ethclient.DialContext(ctx, n.url)
	if err != nil {
		return err
	}
	defer c.Close()
	who := addressOf(n.faucet)
	bal, err := c.BalanceAt(ctx, who, nil)
	if err != nil {
		return err
	}
	if bal.Cmp(new(big.Int).Lsh(big.NewInt(1), 200)) < 0 {
		return fmt.Errorf("geth's developer account %s holds %s wei: not the funded one", who, bal)
	}
	return nil
}

// stop ends geth (SIGTERM, then SIGKILL after 30 s).
func (n *gethNode) stop() error {
	defer n.log.Close()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-n.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
		return errors.New("geth did not exit within 30 s of SIGTERM; killed")
	}
}
