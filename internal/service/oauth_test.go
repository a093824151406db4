package service_test

import (
	"context"
	"errors"
	. "github.com/opentreasury/treasury/internal/service"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
)

// The grant is the service's, not the API's: a token issued here authenticates as its
// client with the scopes asked, for the configured lifetime, and each refusal names its
// RFC 6749 code.
func TestIssueTokenGrantsTheClientsOwnScopes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := f.creds.OAuthClients["trade"]
	at := time.Now().Add(-time.Hour)
	o := &OAuth{Store: f.svc.Store, TTL: time.Minute, Now: func() time.Time { return at }}
	grant := func(scope *string) TokenRequest {
		return TokenRequest{GrantType: "client_credentials", ClientID: client.ClientID, ClientSecret: client.ClientSecret, Scope: scope}
	}

	tok, err := o.IssueToken(ctx, grant(nil))
	if err != nil || tok.Scope != "trade:read trade:write" || tok.ExpiresIn != time.Minute {
		t.Fatalf("every scope: %+v %v", tok, err)
	}
	read := "trade:read"
	tok, err = o.IssueToken(ctx, grant(&read))
	if err != nil || tok.Scope != read {
		t.Fatalf("one scope: %+v %v", tok, err)
	}
	authn := auth.NewAuthenticator(f.svc.Store)
	p, err := authn.Authenticate(ctx, tok.AccessToken)
	if !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("a token of a minute issued an hour ago still authenticates: %+v %v", p, err)
	}
	o.Now = time.Now
	tok, _ = o.IssueToken(ctx, grant(&read))
	if p, err = authn.Authenticate(ctx, tok.AccessToken); err != nil || p.ID != client.ClientID || !p.Can("trade", auth.ActionRead) ||
		p.Can("trade", auth.ActionWrite) {
		t.Fatalf("the token's principal: %+v %v", p, err)
	}

	empty, approve := " ", "trade:approve"
	for name, tc := range map[string]struct {
		req  TokenRequest
		code string
	}{
		"no grant":       {TokenRequest{ClientID: client.ClientID, ClientSecret: client.ClientSecret}, OAuthInvalidRequest},
		"other grant":    {TokenRequest{GrantType: "password"}, OAuthUnsupportedGrantType},
		"wrong secret":   {TokenRequest{GrantType: "client_credentials", ClientID: client.ClientID, ClientSecret: "nope"}, OAuthInvalidClient},
		"unknown client": {TokenRequest{GrantType: "client_credentials", ClientID: "oac_nope", ClientSecret: "nope"}, OAuthInvalidClient},
		"NUL in the id":  {TokenRequest{GrantType: "client_credentials", ClientID: "oac_\x00", ClientSecret: "nope"}, OAuthInvalidClient},
		"empty scope":    {grant(&empty), OAuthInvalidScope},
		"beyond":         {grant(&approve), OAuthInvalidScope},
	} {
		_, err := o.IssueToken(ctx, tc.req)
		var refused *OAuthError
		if !errors.As(err, &refused) || refused.Code != tc.code || refused.Description == "" {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
}
