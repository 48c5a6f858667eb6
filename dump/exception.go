package dump

// Exception is a failure on which Kafka's dump tool dies: an exception its
// main lets escape, which the JVM prints as
// `Exception in thread "main" <class>: <message>` and a stack trace. Text
// stops at it as Kafka's tool does (the record's line printed up to that
// point, no further file, no end-of-run report) and returns it; the caller
// prints Line.
type Exception struct {
	Class   string // the Java exception's class name
	Message string // its message; empty for none
	// Unreadable says the exception is about a file that could not be
	// read (java.nio.file.NoSuchFileException), not about invalid data.
	Unreadable bool
}

func (e *Exception) Error() string {
	if e.Message == "" {
		return e.Class
	}
	return e.Class + ": " + e.Message
}

// Line is what the JVM prints first for the exception.
func (e *Exception) Line() string { return `Exception in thread "main" ` + e.Error() }
