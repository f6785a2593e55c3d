package billing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/postmill/postmill/ports"
)

// fileOffer is one plan of the catalogue file (POSTMILL_PLANS_FILE):
//
//	[{"id": "free", "name": "Free", "monthlyLimit": 3000, "warmupCap": 100},
//	 {"id": "pro", "name": "Pro", "monthlyLimit": 100000, "priceId": "price_123"}]
//
// Absent or zero limits mean none.
type fileOffer struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	MonthlyLimit int64  `json:"monthlyLimit"`
	WarmupCap    int64  `json:"warmupCap"`
	PriceID      string `json:"priceId"`
}

// ParseCatalogue reads a catalogue file's JSON. Unknown fields are refused, so a misspelt limit is not
// silently "no limit".
func ParseCatalogue(data []byte) ([]ports.PlanOffer, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in []fileOffer
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("billing: plan catalogue: %w", err)
	}
	out := make([]ports.PlanOffer, 0, len(in))
	for _, p := range in {
		out = append(out, ports.PlanOffer{
			ID: p.ID, Name: p.Name, PriceID: p.PriceID,
			Plan: ports.Plan{MonthlyLimit: p.MonthlyLimit, WarmupCap: p.WarmupCap},
		})
	}
	return out, nil
}

// LoadCatalogue reads the catalogue file at path; an empty path is an empty catalogue (the free plan only).
func LoadCatalogue(path string) ([]ports.PlanOffer, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("billing: plan catalogue: %w", err)
	}
	return ParseCatalogue(data)
}
