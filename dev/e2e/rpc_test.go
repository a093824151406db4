package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
)

// rpcAnswer is one JSON-RPC response as a client reads it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// postRPC sends body to url with token and reads the JSON-RPC answer into out.
func postRPC(t *testing.T, url, token, body string, out any, headers ...string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST %s %s: %d %s", url, body, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("POST %s: %s: %v", url, raw, err)
	}
}

// An app's key reads the dev bundle's ethereum through POST /api/v1/rpc/ethereum: its chain id,
// the receipt of a payment the service confirmed and that payment's token transfer in the
// logs; a raw transaction is refused, and the calls are in the app's request log.
func TestRPCReadsTheDevChainForAnApp(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	rpcURL := b.APIURL + "/api/v1/rpc/ethereum"

	var chainID rpcAnswer
	postRPC(t, rpcURL, pay.SK, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, &chainID, "X-Correlation-Id", "e2e-rpc-chain-id")
	if chainID.Error != nil || string(chainID.Result) != `"0x539"` {
		t.Fatalf("eth_chainId: %+v %s", chainID.Error, chainID.Result)
	}

	wallet := b.Credentials.Wallets[1]
	if wallet.Chain != "ethereum" || !wallet.AutoSign {
		t.Fatalf("wallet %+v", wallet)
	}
	r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(
		`{"walletId":%q,"asset":"USDC","amount":"2.5","destination":{"address":"0x2222222222222222222222222222222222222222"}}`, wallet.ID))
	if r.status != 201 {
		t.Fatalf("create %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
		t.Fatalf("submit %d %s", r.status, r.raw)
	}
	leg := waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")["legs"].([]any)[0].(map[string]any)
	txHash := leg["txHash"].(string)

	// A batch, read with a tk_ key holding read: the receipt, and a call off the list.
	var batch []rpcAnswer
	postRPC(t, rpcURL, pay.Read, fmt.Sprintf(`[{"jsonrpc":"2.0","id":"receipt","method":"eth_getTransactionReceipt","params":[%q]},`+
		`{"jsonrpc":"2.0","id":"send","method":"eth_sendRawTransaction","params":["0x02"]}]`, txHash), &batch)
	if len(batch) != 2 || batch[0].Error != nil || batch[1].Error == nil {
		t.Fatalf("batch: %+v", batch)
	}
	var receipt struct {
		Status      string `json:"status"`
		BlockNumber string `json:"blockNumber"`
		From        string `json:"from"`
		Logs        []struct {
			Address string `json:"address"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(batch[0].Result, &receipt); err != nil || receipt.Status != "0x1" ||
		!strings.EqualFold(receipt.From, wallet.Address) || len(receipt.Logs) != 1 {
		t.Fatalf("receipt of %s: %s", txHash, batch[0].Result)
	}
	if e := batch[1].Error; e.Code != -32601 || !strings.Contains(e.Message, "Orders go through the lifecycle") {
		t.Fatalf("eth_sendRawTransaction: %+v", e)
	}

	// The token's Transfer is in the logs of the receipt's block.
	var logs rpcAnswer
	postRPC(t, rpcURL, pay.SK, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"eth_getLogs","params":[{"fromBlock":%q,"toBlock":%q,"address":%q}]}`,
		receipt.BlockNumber, receipt.BlockNumber, receipt.Logs[0].Address), &logs)
	if logs.Error != nil || !strings.Contains(strings.ToLower(string(logs.Result)), strings.ToLower(strings.TrimPrefix(txHash, "0x"))) {
		t.Fatalf("eth_getLogs: %+v %s", logs.Error, logs.Result)
	}

	// solana forwards Solana's reads to the dev Solana chain, and refuses its sends.
	var genesis, sent rpcAnswer
	postRPC(t, b.APIURL+"/api/v1/rpc/solana", pay.SK, `{"jsonrpc":"2.0","id":1,"method":"getGenesisHash"}`, &genesis)
	var direct string
	solanaNode{t: t, url: b.SolanaRPCURL()}.call("getGenesisHash", []any{}, &direct)
	if genesis.Error != nil || string(genesis.Result) != strconv.Quote(direct) {
		t.Fatalf("getGenesisHash through the API: %+v %s, the node says %s", genesis.Error, genesis.Result, direct)
	}
	postRPC(t, b.APIURL+"/api/v1/rpc/solana", pay.SK, `{"jsonrpc":"2.0","id":2,"method":"sendTransaction","params":["AA=="]}`, &sent)
	if sent.Error == nil || sent.Error.Code != -32601 || !strings.Contains(sent.Error.Message, "Orders go through the lifecycle") {
		t.Fatalf("sendTransaction on solana: %+v", sent.Error)
	}

	// The first call is in the pay app's request log (written in batches: wait for it).
	wait.For(t, 10*time.Second, "the call to reach the request log", func() bool {
		r := call(t, "GET", b.APIURL+"/developer/logs?correlationId=e2e-rpc-chain-id", pay.SK)
		rows, _ := r.body["data"].([]any)
		if len(rows) != 1 {
			return false
		}
		row := rows[0].(map[string]any)
		if row["method"] != "POST" || row["path"] != "/api/v1/rpc/ethereum" || row["status"] != float64(200) {
			t.Fatalf("request log row %v", row)
		}
		return true
	})
}
