// Package client is the Go client of the treasury API for integrators.
//
// New makes a Client of the REST API, authenticated with an API key (WithToken), OAuth
// client credentials (WithClientCredentials: the token is fetched and renewed by the
// client) or a person's session (WithSession). It has a typed method for every route:
// orders (CreateOrder, SubmitOrder, GetOrder, ListOrders), approvals, signing requests,
// the treasury, policies, events and audit logs, the developer surface (keys, OAuth
// clients, team, request logs, WebSocket configs, webhooks), sessions and health. Each
// list has a List… method reading one Page and an iterator following its cursor. Do
// remains for anything else.
//
// Every call is retried when that is safe (see RetryPolicy): every write carries an
// Idempotency-Key, the same on each retry, so that a retried create or submit never acts
// twice. A refusal is a *Problem, found with errors.As, with the code to branch on, the
// fields at fault and the correlation id to quote.
//
// For the live channel, Subscribe holds one connection, Follow reconnects the way the
// close codes ask, FollowEvents adds what was missed meanwhile from GET /events, and Tail
// prints what arrives (treasury events tail). VerifyWebhook checks a webhook message.
package client
