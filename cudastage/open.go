package cudastage

import "errors"

// Open opens GPU ordinal as a device the scheduler runs segments on: OpenGPU, then
// NewDevice. The returned function unloads the kernels and releases the GPU. The error is
// OpenGPU's (it wraps ErrNoSuchGPU for an ordinal the driver does not have, and otherwise
// says why no GPU can be used) or NewDevice's.
func Open(ordinal int) (*Device, func() error, error) {
	g, err := OpenGPU(ordinal)
	if err != nil {
		return nil, nil, err
	}
	d, err := NewDevice(g)
	if err != nil {
		return nil, nil, errors.Join(err, g.Close())
	}
	return d, func() error { return errors.Join(d.Close(), g.Close()) }, nil
}
