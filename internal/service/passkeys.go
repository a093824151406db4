package service

import (
	"context"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
)

// PasskeyConfig is the relying party people's passkeys belong to: RPID the domain the
// console is reached at, Origins the console's origins (scheme, host and port). With no
// RPID, no passkey can be registered or used.
type PasskeyConfig struct {
	RPID    string
	Origins []string
}

func (c PasskeyConfig) allows(origin string) bool { return slices.Contains(c.Origins, origin) }

// Enabled says whether people may register passkeys here.
func (c PasskeyConfig) Enabled() bool { return c.RPID != "" && len(c.Origins) > 0 }

// passkeyRegistrationTTL is how long a started registration waits for the browser.
const passkeyRegistrationTTL = 5 * time.Minute

// passkeyUser is a person as WebAuthn sees them: their id as the user handle, and the
// passkeys they hold, which a new registration may not repeat.
type passkeyUser struct {
	id, email string
	existing  []webauthn.Credential
}

func (u passkeyUser) WebAuthnID() []byte                         { return []byte(u.id) }
func (u passkeyUser) WebAuthnName() string                       { return u.email }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.email }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.existing }

func (s *Service) relyingParty() (*webauthn.WebAuthn, error) {
	if !s.Passkeys.Enabled() {
		return nil, refuse(Conflict, "Passkeys are not configured here: the operator sets PASSKEY_RP_ID and PASSKEY_ORIGINS (or PUBLIC_URL).")
	}
	return webauthn.New(&webauthn.Config{RPID: s.Passkeys.RPID, RPDisplayName: "treasury", RPOrigins: s.Passkeys.Origins})
}

// passkeyUserOf is the signed-in person with their live passkeys.
func (s *Service) passkeyUserOf(ctx context.Context, who Caller, email string) (passkeyUser, []store.ApproverKey, error) {
	if who.Person == "" {
		return passkeyUser{}, nil, refuse(PermissionDenied, "Passkeys are a person's: sign in to register one.")
	}
	keys, err := s.Store.PasskeysOf(ctx, who.OrgID, who.Person)
	if err != nil {
		return passkeyUser{}, nil, err
	}
	u := passkeyUser{id: who.Person, email: email}
	for _, k := range keys {
		if k.CredentialID == nil || k.RevokedAt != nil {
			continue
		}
		if raw, err := base64.RawURLEncoding.DecodeString(*k.CredentialID); err == nil {
			u.existing = append(u.existing, webauthn.Credential{ID: raw})
		}
	}
	return u, keys, nil
}

// registrationOf is what both halves of a passkey's registration need: the relying party
// (refused where passkeys are not configured) and the person registering.
func (s *Service) registrationOf(ctx context.Context, who Caller, email string) (*webauthn.WebAuthn, passkeyUser, error) {
	rp, err := s.relyingParty()
	if err != nil {
		return nil, passkeyUser{}, err
	}
	u, _, err := s.passkeyUserOf(ctx, who, email)
	return rp, u, err
}

// ListPasskeys lists the signed-in person's passkeys, newest first, revoked ones included.
func (s *Service) ListPasskeys(ctx context.Context, who Caller) ([]store.ApproverKey, error) {
	_, keys, err := s.passkeyUserOf(ctx, who, "")
	return keys, err
}

// BeginPasskeyRegistration starts registering a passkey of the signed-in person, who
// gives their password again (a session alone, stolen, must not add a key that approves
// as them): it returns the options for navigator.credentials.create (JSON) and keeps the
// challenge for FinishPasskeyRegistration. Only P-256 (ES256) keys are asked for, with
// user verification: what approvers and signers verify.
func (s *Service) BeginPasskeyRegistration(ctx context.Context, who Caller, email, password string) ([]byte, error) {
	rp, u, err := s.registrationOf(ctx, who, email)
	if err != nil {
		return nil, err
	}
	person, err := s.Store.UserInOrg(ctx, who.OrgID, who.Person)
	if err != nil {
		return nil, err
	}
	if !auth.PasswordMatches(password, person.PasswordHash) {
		return nil, refuse(Unauthenticated, "The password is not yours: registering a passkey asks for it again.")
	}
	exclude := make([]protocol.CredentialDescriptor, len(u.existing))
	for i, c := range u.existing {
		exclude[i] = c.Descriptor()
	}
	creation, session, err := rp.BeginRegistration(u,
		webauthn.WithCredentialParameters([]protocol.CredentialParameter{{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgES256}}),
		webauthn.WithExclusions(exclude),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{UserVerification: protocol.VerificationRequired}))
	if err != nil {
		return nil, err
	}
	kept, err := json.Marshal(session)
	if err != nil {
		return nil, err
	}
	if err := s.Store.SavePasskeyRegistration(ctx, who.Person, string(kept), s.now().Add(passkeyRegistrationTTL)); err != nil {
		return nil, err
	}
	return json.Marshal(creation)
}

// FinishPasskeyRegistration checks the browser's answer (the PublicKeyCredential as
// JSON) against the started registration and stores the passkey as an approver key of
// the person, kind passkey, its WebAuthn credential id as credentialId.
func (s *Service) FinishPasskeyRegistration(ctx context.Context, who Caller, email string, answer []byte) (*store.ApproverKey, error) {
	rp, u, err := s.registrationOf(ctx, who, email)
	if err != nil {
		return nil, err
	}
	kept, err := s.Store.TakePasskeyRegistration(ctx, who.Person, s.now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(Conflict, "No passkey registration is under way (or it took over five minutes): start again.")
	}
	if err != nil {
		return nil, err
	}
	var session webauthn.SessionData
	if err := json.Unmarshal([]byte(kept), &session); err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(answer)
	if err != nil {
		return nil, invalid(field("credential", "is not a WebAuthn registration: "+err.Error()))
	}
	cred, err := rp.CreateCredential(u, session, parsed)
	if err != nil {
		return nil, invalid(field("credential", "does not hold: "+protocolDetail(err)))
	}
	pub, err := compressedP256(cred.PublicKey)
	if err != nil {
		return nil, invalid(field("credential", err.Error()))
	}
	credentialID := base64.RawURLEncoding.EncodeToString(cred.ID)
	k := &store.ApproverKey{ID: ids.New(ids.ApproverKey), OrgID: who.OrgID, Scheme: approvers.P256,
		PublicKey: base64.StdEncoding.EncodeToString(pub), Kind: approvers.KindPasskey, CredentialID: &credentialID,
		UserID: &who.Person, CreatedAt: s.now()}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return createApproverKey(ctx, tx, k) },
		"approver_key.registered", "approver_key", k.ID, map[string]any{"kind": k.Kind, "scheme": k.Scheme, "publicKey": k.PublicKey,
			"credentialId": credentialID})
	return k, err
}

// RevokePasskey revokes one of the signed-in person's passkeys: decisions it signed stay
// as they are, and it signs no new one.
func (s *Service) RevokePasskey(ctx context.Context, who Caller, id string) error {
	_, keys, err := s.passkeyUserOf(ctx, who, "")
	if err != nil {
		return err
	}
	i := slices.IndexFunc(keys, func(k store.ApproverKey) bool { return k.ID == id })
	if i < 0 {
		return refuse(NotFound, "No passkey of yours has this id.")
	}
	if keys[i].RevokedAt != nil {
		return nil
	}
	return s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.RevokeApproverKey(ctx, who.OrgID, id, s.now()) },
		"approver_key.revoked", "approver_key", id, map[string]any{"kind": approvers.KindPasskey})
}

// compressedP256 is a COSE ES256 public key as an approver key keeps it.
func compressedP256(cose []byte) ([]byte, error) {
	parsed, err := webauthncose.ParsePublicKey(cose)
	if err != nil {
		return nil, errors.New("its public key does not parse")
	}
	ec, ok := parsed.(webauthncose.EC2PublicKeyData)
	if !ok || ec.Algorithm != int64(webauthncose.AlgES256) {
		return nil, errors.New("its public key is not a P-256 (ES256) key")
	}
	key, err := ec.ToECDSA()
	if err != nil {
		return nil, errors.New("its public key is not a point of P-256")
	}
	return elliptic.MarshalCompressed(elliptic.P256(), key.X, key.Y), nil
}

// protocolDetail is what a WebAuthn check says went wrong, without its stack.
func protocolDetail(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != "" {
		return pe.Details
	}
	return err.Error()
}
