package capture

import "github.com/tidwall/gjson"

// InputReader reads one API's request body, parsed (root is a JSON
// object), into the content Input records: the system instructions the API
// takes apart from its messages, if it has any, and the messages in the
// order sent. The body may be the first part of a longer one; a reader
// leaves out what it cannot read whole rather than record half of it.
type InputReader func(root gjson.Result) (system []Part, messages []Message)

// inputReaders holds the readers by dialect name. It is written only by
// init functions, so Input reads it without a lock, as meter reads its
// dialects.
var inputReaders = map[string]InputReader{}

// RegisterInput makes Input read the request bodies of the named dialect
// (a meter.DialectInfo's Name) with read, so that a dialect added with
// meter.RegisterDialect gets its input captured as the built-in ones do.
// It must be called from an init function; a name already registered
// panics, as meter.RegisterDialect does.
//
// The registry is here rather than a field of meter.DialectInfo because
// capture imports meter (its Output is a meter.TextSink), so meter cannot
// name Part or Message, and because measuring never reads what a request
// says: meter has no use for these readers. The two registrations are
// independent: a dialect's output is captured from the text its Event and
// Body hand to the meter (Observer.Text), with a reader registered here or
// not; without one its input is left out, not guessed with another API's
// reader.
func RegisterInput(dialect string, read InputReader) {
	if dialect == "" || read == nil {
		panic("capture: input reader needs a dialect name and a function")
	}
	if _, ok := inputReaders[dialect]; ok {
		panic("capture: input reader already registered: " + dialect)
	}
	inputReaders[dialect] = read
}
