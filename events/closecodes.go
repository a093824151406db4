package events

// Close codes of the live channel (SPEC 4), shared by the server and the Go client.
// 4000–4499 ask the client to reconnect, 4500–4999 not to.
const (
	CloseGoingAway      = 1001 // the server is restarting
	CloseConfigDisabled = 4001
	CloseCredential     = 4003 // the key or OAuth client was revoked, or the token expired
	CloseConfigDeleted  = 4004
	CloseTooSlow        = 4008
)
