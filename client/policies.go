package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/opentreasury/treasury/apitypes"
)

// PolicyRules are an app's policy (SPEC 3.4); every rule is optional. Amounts are decimal
// strings of USD.
type PolicyRules struct {
	MaxOrderUSD string `json:"maxOrderUsd,omitempty"`
	// DailyVolumeUSD limits a wallet's orders submitted since 00:00 UTC.
	DailyVolumeUSD string `json:"dailyVolumeUsd,omitempty"`
	// DestinationWhitelist applies to payments.
	DestinationWhitelist []string `json:"destinationWhitelist,omitempty"`
	// AllowedPairs and DeniedPairs apply to trades; a pair names two assets in either order.
	AllowedPairs [][2]string `json:"allowedPairs,omitempty"`
	DeniedPairs  [][2]string `json:"deniedPairs,omitempty"`
	// AllowedProtocols applies to earn and borrow orders.
	AllowedProtocols []string `json:"allowedProtocols,omitempty"`
	// ApprovalTiers: an order needs the quorum of the highest tier whose MinUSD it reaches.
	ApprovalTiers []ApprovalTier `json:"approvalTiers,omitempty"`
}

// ApprovalTier requires Quorum approvals for orders worth at least MinUSD.
type ApprovalTier struct {
	MinUSD string `json:"minUsd"`
	Quorum int    `json:"quorum"`
}

// Policy is an app's policy and its version.
type Policy struct {
	App     string      `json:"app"`
	Version int         `json:"version"`
	Rules   PolicyRules `json:"rules"`
	// UpdatedBy and UpdatedAt are empty while the policy was never set (Version 0).
	UpdatedBy string     `json:"updatedBy"`
	UpdatedAt *time.Time `json:"updatedAt"`
}

// PolicyEvaluation is a dry run's answer: what the policy would decide for an order.
type PolicyEvaluation = apitypes.PolicyEvaluation

// PolicyCheck is one rule applied to an order.
type PolicyCheck = apitypes.PolicyCheck

func policyPath(app string) string { return "/policies/" + url.PathEscape(app) }

// GetPolicy reads an app's policy (GET /policies/{app}, action developer).
func (c *Client) GetPolicy(ctx context.Context, app string, opts ...CallOption) (*Policy, error) {
	return get[Policy](ctx, c, policyPath(app), opts)
}

// PutPolicy replaces an app's rules (PUT /policies/{app}, action developer) and bumps its
// version; orders submitted afterwards are held to them.
func (c *Client) PutPolicy(ctx context.Context, app string, rules PolicyRules, opts ...CallOption) (*Policy, error) {
	return do[Policy](ctx, c, http.MethodPut, policyPath(app), rules, opts)
}

// EvaluatePolicy runs the policy of the order's app over it without changing anything
// (POST /policies/{app}/evaluate, action write or developer).
func (c *Client) EvaluatePolicy(ctx context.Context, order OrderRequest, opts ...CallOption) (*PolicyEvaluation, error) {
	if order == nil {
		return nil, fmt.Errorf("client: EvaluatePolicy needs a PaymentRequest, TradeRequest, EarnRequest or BorrowRequest")
	}
	info, err := domainInfo(order.orderDomain())
	if err != nil {
		return nil, err
	}
	return do[PolicyEvaluation](ctx, c, http.MethodPost, policyPath(info.App)+"/evaluate", order, opts)
}
