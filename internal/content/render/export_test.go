package render

// SetStartedHook lets tests count the renders a HelmRenderer starts.
func SetStartedHook(r *HelmRenderer, hook func()) { r.started = hook }
