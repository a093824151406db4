package service

import "testing"

// A kind without an answer would reach callers as a 500 (the API) or a logged failure
// (the console) instead of the refusal it is.
func TestEveryKindHasAnAnswer(t *testing.T) {
	for k := Kind(1); k < kinds; k++ {
		if k.Status() == 0 || k.Code() == "" {
			t.Errorf("kind %d has no answer: status %d, code %q", k, k.Status(), k.Code())
		}
	}
	if Kind(0).Status() != 0 || Kind(0).Code() != "" || kinds.Status() != 0 {
		t.Error("something that is no refusal's kind has an answer")
	}
}
