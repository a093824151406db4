package service

import (
	"encoding/json"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// Answer is the order as the API answers it (SPEC 3.2); read in detail, with its status
// history.
func (o *Order) Answer() apitypes.Order {
	out := apitypes.Order{
		ID: o.ID, Domain: apitypes.Domain(o.Domain), App: o.App, Status: string(o.Status), WalletID: o.WalletID, Chain: o.Chain,
		Legs: make([]apitypes.Leg, len(o.Legs)), AmountUSD: o.AmountUSD.StringFixedBank(2), PayloadHash: o.PayloadHash,
		PolicyVersion: o.PolicyVersion, PolicyDecision: o.PolicyDecision,
		Approval: apitypes.OrderApproval{Required: o.ApprovalRequired, Quorum: o.ApprovalQuorum, ItemID: o.ApprovalItemID,
			Decisions: DecisionAnswers(o.Decisions)},
		CreatedBy: o.CreatedBy, CreatedByUser: events.NullableString(o.CreatedByUser), ScheduleID: o.ScheduleID, CorrelationID: o.CorrelationID,
		WorkflowID: o.WorkflowID, CreatedAt: events.TimeOf(o.CreatedAt), UpdatedAt: events.TimeOf(o.UpdatedAt),
		SubmittedAt: events.TimeOrNil(o.SubmittedAt), CompletedAt: events.TimeOrNil(o.CompletedAt),
		OrderDetails: DetailsAnswer(o.Details.Details),
	}
	for i, l := range o.Legs {
		out.Legs[i] = apitypes.Leg{Leg: l.Leg, Status: string(l.Status), SigningRequestID: l.SigningRequestID, TxHash: l.TxHash}
		for _, h := range l.Hashes() {
			if l.TxHash == nil || h != *l.TxHash {
				out.Legs[i].ReplacedTxHashes = append(out.Legs[i].ReplacedTxHashes, h)
			}
		}
	}
	if p, ok := o.Details.Details.(*orders.Payment); ok && p.IsBatch() {
		for pos, l := range o.Legs {
			part, first := p.Part(o.Chain, pos)
			for i := range part {
				r := &out.Recipients[first+i]
				r.Part, r.Status, r.TxHash = pos+1, string(l.Status), l.TxHash
			}
		}
	}
	if o.FailureCode != nil {
		out.Failure = &events.Failure{Code: *o.FailureCode}
		if o.FailureMessage != nil {
			out.Failure.Message = *o.FailureMessage
		}
	}
	if o.RejectionReason != nil {
		out.Rejection = &apitypes.Rejection{Reason: *o.RejectionReason}
		if o.RejectionDetail != nil {
			// Written by the step that rejected the order: it always decodes.
			_ = json.Unmarshal([]byte(*o.RejectionDetail), out.Rejection)
			out.Rejection.Reason = *o.RejectionReason
		}
		if out.Rejection.DecidedBy != "" && out.Rejection.DecidedByUser == nil {
			// null: no person made the credential that rejected it.
			none := events.NullableString("")
			out.Rejection.DecidedByUser = &none
		}
	}
	if o.History != nil {
		out.History = make([]apitypes.StatusChange, len(o.History))
		for i, h := range o.History {
			out.History[i] = apitypes.StatusChange{Status: string(h.Status), Reason: h.Reason, CorrelationID: h.CorrelationID,
				At: events.TimeOf(h.At)}
		}
	}
	return out
}

// DetailsAnswer is what an order asks for, in the API's fields.
func DetailsAnswer(d orders.Details) apitypes.OrderDetails {
	switch d := d.(type) {
	case *orders.Payment:
		out := apitypes.OrderDetails{Asset: d.Asset, Amount: d.Amount.String(), Reference: d.Reference}
		if !d.IsBatch() {
			out.Destination = &apitypes.Destination{Address: d.Destination.Address, Label: d.Destination.Label}
		}
		for _, r := range d.Recipients {
			out.Recipients = append(out.Recipients, apitypes.Recipient{Address: r.Address, Amount: r.Amount.String(),
				Reference: r.Reference, Label: r.Label})
		}
		return out
	case *orders.Trade:
		return apitypes.OrderDetails{SellAsset: d.SellAsset, BuyAsset: d.BuyAsset, SellAmount: d.SellAmount.String(),
			MaxSlippageBps: d.MaxSlippageBps}
	case *orders.Earn:
		return apitypes.OrderDetails{Protocol: d.Protocol, Action: d.Action, Asset: d.Asset, Amount: d.Amount.String()}
	case *orders.Borrow:
		return apitypes.OrderDetails{Protocol: d.Protocol, Action: d.Action, Asset: d.Asset, Amount: d.Amount.String(),
			CollateralAsset: d.CollateralAsset}
	}
	return apitypes.OrderDetails{}
}

// DecisionAnswers are an approval item's decisions as the API answers them.
func DecisionAnswers(ds []store.ApprovalDecision) []apitypes.ApprovalDecision {
	out := make([]apitypes.ApprovalDecision, len(ds))
	for i, d := range ds {
		out[i] = apitypes.ApprovalDecision{Decision: d.Decision, DecidedBy: d.DecidedBy, DecidedAt: events.TimeOf(d.DecidedAt),
			Comment: d.Comment, KeyID: d.KeyID, Signature: d.Signature, AuthenticatorData: d.AuthenticatorData, ClientDataJSON: d.ClientDataJSON}
		if d.DecidedByUser != "" {
			out[i].DecidedByUser = &ds[i].DecidedByUser
		}
	}
	return out
}
