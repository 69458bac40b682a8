package stats

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// MaxLiveRows bounds the live rows a snapshot may carry, as the live table
// bounds its keys (package live), so that a document cannot make the
// reader allocate without bound.
const MaxLiveRows = 4096

// LiveRow is one provider and model's requests in flight at the instant a
// view was taken: not a window's, the present's. Waiting, Receiving and
// Stalled add up to InFlight. The model is the one requested, as the
// in-flight counts know it before any response model is.
type LiveRow struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// InFlight counts requests whose response has begun and not ended.
	InFlight int64 `json:"in_flight"`
	// Waiting have had no byte of their body yet; Receiving had one
	// within the stall threshold; Stalled had none for longer.
	Waiting   int64 `json:"waiting"`
	Receiving int64 `json:"receiving"`
	Stalled   int64 `json:"stalled"`
}

func (r *LiveRow) add(o *LiveRow) {
	r.InFlight += o.InFlight
	r.Waiting += o.Waiting
	r.Receiving += o.Receiving
	r.Stalled += o.Stalled
}

func (r *LiveRow) check() error {
	switch {
	case r.InFlight < 0 || r.Waiting < 0 || r.Receiving < 0 || r.Stalled < 0:
		return fmt.Errorf("negative count")
	case r.Waiting+r.Receiving+r.Stalled != r.InFlight:
		return fmt.Errorf("waiting %d + receiving %d + stalled %d is not in flight %d", r.Waiting, r.Receiving, r.Stalled, r.InFlight)
	}
	return nil
}

// SetLive sets the requests in flight of the instance the aggregate
// describes, at the instant it was taken: rows of the same provider and
// model add up.
func (a *Aggregate) SetLive(rows []LiveRow) {
	a.live = nil
	a.mergeLive(rows)
}

// mergeLive adds rows to a's live rows, keeping them sorted by provider and
// model; instances' counts add up, as their requests do.
func (a *Aggregate) mergeLive(rows []LiveRow) {
	for i := range rows {
		r := &rows[i]
		j := sort.Search(len(a.live), func(j int) bool { return !liveLess(&a.live[j], r) })
		if j < len(a.live) && a.live[j].Provider == r.Provider && a.live[j].Model == r.Model {
			a.live[j].add(r)
			continue
		}
		a.live = append(a.live, LiveRow{})
		copy(a.live[j+1:], a.live[j:])
		a.live[j] = LiveRow{Provider: r.Provider, Model: r.Model}
		a.live[j].add(r)
	}
}

// Live returns the requests in flight, sorted by provider and model.
func (a *Aggregate) Live() []LiveRow { return a.live }

func liveLess(a, b *LiveRow) bool {
	if c := strings.Compare(a.Provider, b.Provider); c != 0 {
		return c < 0
	}
	return a.Model < b.Model
}

// readLive checks a snapshot's live rows.
func readLive(rows []LiveRow) error {
	if len(rows) > MaxLiveRows {
		return fmt.Errorf("%d live rows, more than %d", len(rows), MaxLiveRows)
	}
	for i := range rows {
		if err := rows[i].check(); err != nil {
			return fmt.Errorf("live row %d (%s/%s): %v", i, rows[i].Provider, rows[i].Model, err)
		}
	}
	return nil
}

// WriteLive prints the requests in flight under the table, when there are
// any: the present, where the table above is the window's.
func WriteLive(out io.Writer, rep *Report) error {
	var inFlight bool
	for i := range rep.Live {
		inFlight = inFlight || rep.Live[i].InFlight > 0
	}
	if !inFlight {
		return nil
	}
	lines := [][]string{{"PROVIDER", "MODEL", "IN_FLIGHT", "WAITING", "RECEIVING", "STALLED"}}
	for i := range rep.Live {
		r := &rep.Live[i]
		if r.InFlight == 0 {
			continue
		}
		lines = append(lines, []string{r.Provider, r.Model, fmt.Sprint(r.InFlight), fmt.Sprint(r.Waiting), fmt.Sprint(r.Receiving), fmt.Sprint(r.Stalled)})
	}
	if _, err := fmt.Fprintf(out, "\nIn flight now (%s):\n", rep.GeneratedAt.Format(time.TimeOnly)); err != nil {
		return err
	}
	return writeAligned(out, lines, 2)
}
