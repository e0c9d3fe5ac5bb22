package render

// SetStartedHook lets tests see the render processes a HelmRenderer starts.
func SetStartedHook(r *HelmRenderer, hook func(pid int)) { r.started = hook }

// SetServesRenders pretends that the binary did (or did not) call
// ServeIfRenderProcess; the returned func restores what it was.
func SetServesRenders(v bool) (restore func()) {
	was := servesRenders.Swap(v)
	return func() { servesRenders.Store(was) }
}
