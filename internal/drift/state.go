package drift

// State returns the row's state without building the reason's text, for
// the recorder to read per request.
func (d *Detector) State() State { return d.state }
