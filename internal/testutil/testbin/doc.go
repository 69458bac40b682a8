// Package testbin is what the tests of the built tokentap binary share:
// finding the repository, getting the binary ($TOKENTAP_BINARY, or built
// once per test process), running it on a Caddyfile until it answers and
// stopping it, checking and picking ports, and making the trace contexts
// by which a test finds each request's span. The end-to-end tests, the
// smoke test and the secrets test each had their own copies of these;
// they differed in messages and timeouts, not in what they did.
package testbin
