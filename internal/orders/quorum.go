package orders

// ItemOutcome is the status of an approval item after a decision on it (maker-checker):
// rejected at the first REJECT, approved once approvals (the item's APPROVEs, this one
// counted) reach required, pending otherwise. The store applies it inside the decision's
// transaction, with the item locked, so two approvers deciding at once cannot both miss
// the quorum or both pass it.
func ItemOutcome(decision string, approvals, required int) string {
	switch {
	case decision == Reject:
		return ItemRejected
	case approvals >= required:
		return ItemApproved
	default:
		return ItemPending
	}
}
