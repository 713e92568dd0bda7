package engine

// Closed reports whether Close has begun, after which the engine admits no work: a
// server's readiness.
func (e *Engine) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}
