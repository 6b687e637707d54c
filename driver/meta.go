package driver

import "encoding/json"

// decodeMeta decodes a job's meta, a JSON object, keeping its string values. The SQL
// allows any JSON object, so a meta written by another client may hold other values; they
// are left out rather than failing the claim. It returns nil for anything but an object.
func decodeMeta(b []byte) map[string]string {
	var m map[string]string
	if json.Unmarshal(b, &m) == nil {
		return m
	}
	var any map[string]any
	if json.Unmarshal(b, &any) != nil {
		return nil
	}
	m = make(map[string]string, len(any))
	for k, v := range any {
		if s, ok := v.(string); ok {
			m[k] = s
		}
	}
	return m
}
