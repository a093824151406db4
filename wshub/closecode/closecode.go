// Package closecode names the live channel's close codes (SPEC 4), shared by the server
// (wshub) and the Go client, which reconnects or not by them: 4000–4499 ask the client to
// reconnect, 4500–4999 not to.
package closecode

const (
	GoingAway      = 1001 // the server is restarting
	ConfigDisabled = 4001
	Credential     = 4003 // the key or OAuth client was revoked
	ConfigDeleted  = 4004
	TooSlow        = 4008
)
