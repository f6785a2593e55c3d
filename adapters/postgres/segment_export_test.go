package postgres

// SetPreviewIDCap changes how many matching ids a segment preview reads before it counts instead, and
// returns a function that puts it back.
func SetPreviewIDCap(n int) (restore func()) {
	old := previewIDCap
	previewIDCap = n
	return func() { previewIDCap = old }
}
