package auditchain

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"unicode/utf8"
)

// CanonicalJSON writes one JSON value canonically, so that any two encodings of the same
// value (whitespace, key order, escapes) hash alike: no whitespace; object keys sorted by
// their UTF-8 bytes, a repeated key keeping its last value; numbers exactly as written;
// strings with `"` and `\` escaped, \b \f \n \r \t for those controls, \u00xx (lowercase
// hex) for the other characters below U+0020, and every other character as itself in
// UTF-8. It is RFC 8785's form but for numbers, which are kept as written.
func CanonicalJSON(raw []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return appendCanonical(make([]byte, 0, len(raw)), v), nil
}

// appendCanonical writes a value decoded with UseNumber.
func appendCanonical(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		if v {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case json.Number:
		return append(b, v...)
	case string:
		return appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, item := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, item)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendCanonical(b, v[k])
		}
		return append(b, '}')
	}
	panic("auditchain: a value json.Decoder does not produce")
}

// shortEscapes are the characters a canonical string escapes with a letter (RFC 8785:
// as JSON.stringify does), indexed by the character.
var shortEscapes = [...]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendString writes s as a canonical JSON string. Bytes of s that are not UTF-8 are
// written as U+FFFD, as a JSON encoder and decoder would leave them.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r < rune(len(shortEscapes)) && shortEscapes[r] != 0:
			b = append(b, '\\', shortEscapes[r])
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
