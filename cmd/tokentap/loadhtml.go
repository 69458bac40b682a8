package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/loadreport"
)

// checkReportPath refuses a --report path that cannot be written before
// the run, so a typo in a directory does not cost a long run its charts.
func checkReportPath(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("--report %s: is a directory; want a file, e.g. %s", path, filepath.Join(path, "report.html"))
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--report %s: no directory %s to write it in", path, dir)
	}
	return nil
}

// writeReportFile writes runs as the HTML report at path, replacing it
// only once the whole page is written.
func writeReportFile(path, title string, runs []loadreport.Run) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := loadreport.Write(tmp, title, runs); err != nil {
		tmp.Close()
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return nil
}

// writeLoadReport writes the HTML report of one run or sweep (exactly one
// of rep and sweep), named for the file, when path is set.
func writeLoadReport(path string, rep *loadgen.Report, sweep *loadgen.SweepReport) error {
	if path == "" {
		return nil
	}
	run := loadreport.Run{Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), Report: rep, Sweep: sweep}
	first := rep
	if sweep != nil && len(sweep.Levels) > 0 {
		first = sweep.Levels[0]
	}
	title := "tokentap load"
	if first != nil {
		var models []string
		for _, m := range first.Models {
			models = append(models, m.Model)
		}
		title += ": " + strings.Join(models, ", ") + " at " + first.URL
	}
	return writeReportFile(path, title, []loadreport.Run{run})
}

// writeOutput writes a report to stdout as indented JSON (--json) or as
// its table.
func writeOutput(out io.Writer, asJSON bool, rep interface{ WriteTable(io.Writer) error }) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteTable(out)
}
