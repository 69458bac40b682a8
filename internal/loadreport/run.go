package loadreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// Run is one named report: a single run or a sweep, exactly one of the two.
// Reports are compared model by model, matched by the model's name; a
// caller comparing different models (a recorded model and its candidate)
// renames the ModelReports to the name to compare them under.
type Run struct {
	// Name names the run in legends and tables: "recorded", "candidate",
	// a file name.
	Name   string
	Report *loadgen.Report
	Sweep  *loadgen.SweepReport
}

// check says what is wrong with runs for a report or a comparison.
func check(runs []Run) error {
	if len(runs) == 0 {
		return errors.New("no run to report")
	}
	seen := map[string]bool{}
	for i, r := range runs {
		switch {
		case r.Name == "":
			return fmt.Errorf("run %d has no name", i+1)
		case seen[r.Name]:
			return fmt.Errorf("two runs are named %q", r.Name)
		case (r.Report == nil) == (r.Sweep == nil):
			return fmt.Errorf("run %q: want a report or a sweep, exactly one", r.Name)
		case r.Sweep != nil && len(r.Sweep.Levels) == 0:
			return fmt.Errorf("run %q: a sweep without a level", r.Name)
		}
		if r.Sweep != nil {
			if r.Sweep.Sweep != "concurrency" && r.Sweep.Sweep != "rate" {
				return fmt.Errorf("run %q: a sweep over %q, want concurrency or rate", r.Name, r.Sweep.Sweep)
			}
			for j, l := range r.Sweep.Levels {
				if l == nil {
					return fmt.Errorf("run %q: level %d is empty", r.Name, j+1)
				}
			}
		}
		seen[r.Name] = true
	}
	return nil
}

// level is one report of a run: the run itself, or one level of a sweep.
type level struct {
	param string // "" for a single run, else the sweep's "concurrency" or "rate"
	value float64
	rep   *loadgen.Report
}

// levels are r's reports in the order run.
func (r Run) levels() []level {
	if r.Report != nil {
		return []level{{rep: r.Report}}
	}
	out := make([]level, 0, len(r.Sweep.Levels))
	for _, rep := range r.Sweep.Levels {
		out = append(out, level{param: r.Sweep.Sweep, value: levelValue(r.Sweep.Sweep, rep), rep: rep})
	}
	return out
}

// levelValue is rep's value of the sweep's parameter.
func levelValue(param string, rep *loadgen.Report) float64 {
	if param == "rate" {
		return rep.Rate
	}
	return float64(rep.Concurrency)
}

// levelText names a level as the table and the legends show it.
func levelText(param string, v float64) string {
	switch param {
	case "":
		return ""
	case "rate":
		return formatFloat(v) + " requests/s"
	}
	return param + " " + formatFloat(v)
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// model is rep's report of the model named m, or nil.
func model(rep *loadgen.Report, m string) *loadgen.ModelReport {
	for i := range rep.Models {
		if rep.Models[i].Model == m {
			return &rep.Models[i]
		}
	}
	return nil
}

// ReadRun reads what `tokentap load --json` wrote, a single run or a sweep
// (which has "levels"), and names it name. Anything else is an error that
// says what the data is not.
func ReadRun(name string, data []byte) (Run, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return Run{}, fmt.Errorf("%s: not JSON: %v", name, err)
		}
		return Run{}, fmt.Errorf("%s: not a report of tokentap load --json (want a JSON object): %v", name, err)
	}
	run := Run{Name: name}
	switch {
	case keys["levels"] != nil:
		run.Sweep = &loadgen.SweepReport{}
		if err := json.Unmarshal(data, run.Sweep); err != nil {
			return Run{}, fmt.Errorf("%s: a sweep report that does not read as one: %v", name, err)
		}
		for i, l := range run.Sweep.Levels {
			if l == nil || l.Models == nil {
				return Run{}, fmt.Errorf("%s: sweep level %d has no models", name, i+1)
			}
		}
	case keys["models"] != nil && keys["total"] != nil:
		run.Report = &loadgen.Report{}
		if err := json.Unmarshal(data, run.Report); err != nil {
			return Run{}, fmt.Errorf("%s: a report that does not read as one: %v", name, err)
		}
	default:
		return Run{}, fmt.Errorf(`%s: not a report of tokentap load --json: it has neither "models" and "total" (a run) nor "levels" (a sweep)`, name)
	}
	if err := check([]Run{run}); err != nil {
		return Run{}, fmt.Errorf("%s: %v", name, err)
	}
	return run, nil
}

// started is when the run's first report began.
func (r Run) started() time.Time {
	if r.Report != nil {
		return r.Report.Started
	}
	return r.Sweep.Levels[0].Started
}
