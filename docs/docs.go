// Package docs holds the documents the service serves about itself: the OpenAPI document
// of its HTTP API (openapi.json, in this directory beside the prose it accompanies).
package docs

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the API, served at GET /api/v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
