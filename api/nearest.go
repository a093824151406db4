package api

import (
	"strings"

	"github.com/gin-gonic/gin"
)

// nearestRoute is the served route a request under the API's base most likely meant, in
// the OpenAPI document's notation ("GET /api/v1/payments/{id}"), or "" when none is close.
// A route scores per path segment: 2 for a segment it takes (a parameter takes any), 1
// for a near miss (a typo, a plural), less one per segment too many or too few; it is a
// candidate only if one of its named segments (not a parameter) was hit or nearly.
func nearestRoute(routes gin.RoutesInfo, method, path string) string {
	below, ok := strings.CutPrefix(path, apiBase+"/")
	if !ok {
		return ""
	}
	asked := strings.Split(strings.Trim(below, "/"), "/")
	// A score at or below 0 is too far to be a guess worth printing.
	best, bestScore, bestSameMethod := "", 0, false
	for _, r := range routes {
		rest, ok := strings.CutPrefix(r.Path, apiBase+"/")
		if !ok {
			continue
		}
		served := strings.Split(rest, "/")
		score, named := -abs(len(served)-len(asked)), false
		for i := range min(len(served), len(asked)) {
			s := segmentScore(served[i], asked[i])
			score += s
			named = named || (s > 0 && !isParam(served[i]))
		}
		if !named {
			continue
		}
		sameMethod := r.Method == method
		if score > bestScore || (score == bestScore && sameMethod && !bestSameMethod) {
			best, bestScore, bestSameMethod = r.Method+" "+openAPIPath(r.Path), score, sameMethod
		}
	}
	return best
}

func isParam(segment string) bool {
	return strings.HasPrefix(segment, ":") || strings.HasPrefix(segment, "*")
}

func segmentScore(served, asked string) int {
	switch {
	case isParam(served):
		if asked != "" {
			return 2
		}
	case served == asked:
		return 2
	case editDistance(served, asked) <= max(1, min(len(served), len(asked))/4):
		return 1
	}
	return 0
}

// openAPIPath writes gin's ":id" parameters as the OpenAPI document's "{id}".
func openAPIPath(path string) string {
	segments := strings.Split(path, "/")
	for i, s := range segments {
		if isParam(s) {
			segments[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segments, "/")
}

// editDistance is the Levenshtein distance between two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
