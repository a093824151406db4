package orders

import "testing"

func TestItemOutcome(t *testing.T) {
	for _, tc := range []struct {
		decision            string
		approvals, required int
		want                string
	}{
		{Approve, 1, 2, ItemPending},
		{Approve, 2, 2, ItemApproved},
		{Approve, 3, 2, ItemApproved},
		{Reject, 0, 2, ItemRejected},
		// A REJECT decides even when the APPROVEs already counted would reach the quorum.
		{Reject, 2, 2, ItemRejected},
		{Approve, 1, 1, ItemApproved},
	} {
		if got := ItemOutcome(tc.decision, tc.approvals, tc.required); got != tc.want {
			t.Errorf("ItemOutcome(%s, %d of %d) = %s, want %s", tc.decision, tc.approvals, tc.required, got, tc.want)
		}
	}
}
