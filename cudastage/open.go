package cudastage

import "errors"

// Open opens GPU ordinal as a device the scheduler runs segments on: OpenGPU, then
// NewDevice. It returns at once; the device opens in the background once started
// (Device.Start, or its first call that needs the GPU; Ready, and OpenErr for why it
// could not). The returned function unloads the kernels and releases
// the GPU. The error is OpenGPU's: no GPU can be used at all, or a negative ordinal.
func Open(ordinal int) (*Device, func() error, error) {
	g, err := OpenGPU(ordinal)
	if err != nil {
		return nil, nil, err
	}
	d := NewDevice(g)
	return d, func() error { return errors.Join(d.Close(), g.Close()) }, nil
}
