// Package e2e holds the tests that need built binaries and real processes:
// tokentap itself, the simulator run as a separate process, and the
// third-party programs users run tokentap with. Every file but this one is
// a test; the tests skip without their binaries unless
// TOKENTAP_REQUIRE_E2E=1, and the .ci/ scripts build the binaries and run
// them.
package e2e
