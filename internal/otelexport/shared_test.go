package otelexport

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// setAside clears s for the test and puts its holders back after it, so a
// test can build the value from scratch while other tests hold it.
func (s *shared[V]) setAside(t *testing.T) {
	s.mu.Lock()
	refs, value, stop := s.refs, s.value, s.stop
	var zero V
	s.refs, s.value, s.stop = 0, zero, nil
	s.mu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		s.refs, s.value, s.stop = refs, value, stop
		s.mu.Unlock()
	})
}

// empty says whether s has no holder and no value, as after the last
// release.
func (s *shared[V]) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs == 0 && s.stop == nil
}

// TestSharedLifetime: the first holder builds, the last one stops, a
// release called twice counts once, a failed build leaves no holder and a
// failed stop is logged.
func TestSharedLifetime(t *testing.T) {
	tests := []struct {
		name     string
		holders  int
		buildErr error
		stopErr  error
		// wantBuilds and wantStops are the calls expected after every
		// holder released (each release called twice).
		wantBuilds, wantStops int
		wantLog               string
	}{
		{name: "one holder", holders: 1, wantBuilds: 1, wantStops: 1},
		{name: "three holders share one value, stopped once", holders: 3, wantBuilds: 1, wantStops: 1},
		{name: "a failed build: no holder, nothing to stop", holders: 1, buildErr: errors.New("no endpoint"), wantBuilds: 1},
		{name: "a failed stop is logged", holders: 2, stopErr: errors.New("deadline exceeded"), wantBuilds: 1, wantStops: 1, wantLog: "shutting down the test value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			logger := zap.New(core)
			s := shared[*int]{what: "test value"}
			var builds, stops int
			build := func() (*int, func(context.Context) error, error) {
				builds++
				if tt.buildErr != nil {
					return nil, nil, tt.buildErr
				}
				v := builds
				return &v, func(context.Context) error { stops++; return tt.stopErr }, nil
			}
			var releases []func()
			var first *int
			for i := range tt.holders {
				v, release, err := s.acquire(logger, build)
				if tt.buildErr != nil {
					if err == nil || release != nil {
						t.Fatalf("acquire: err %v, release %v: want the build's error and no release", err, release != nil)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = v
				} else if v != first {
					t.Errorf("holder %d got another value", i)
				}
				releases = append(releases, release)
			}
			if got := s.holders(); got != len(releases) {
				t.Errorf("holders = %d, want %d", got, len(releases))
			}
			var wg sync.WaitGroup
			for _, release := range releases {
				wg.Add(2)
				go func() { defer wg.Done(); release() }()
				go func() { defer wg.Done(); release() }()
			}
			wg.Wait()
			if builds != tt.wantBuilds || stops != tt.wantStops {
				t.Errorf("builds %d stops %d, want %d and %d", builds, stops, tt.wantBuilds, tt.wantStops)
			}
			if !s.empty() {
				t.Errorf("holders %d after every release", s.holders())
			}
			if got := logs.FilterMessage(tt.wantLog).Len(); tt.wantLog != "" && got != 1 {
				t.Errorf("%d log lines %q, want 1 (all: %v)", got, tt.wantLog, logs.All())
			}
		})
	}
}
