package pipeline

// The load stage: the source of array chains (see array.go).

const stageLoad = "load"

func init() { builtin(loadDef) }

var loadDef = &StageDef{
	Name: stageLoad,
	Kind: SourceKind,
	Help: "read a NumPy .npy float32 array (any shape, C order) for the array stages",
	Doc: `Reads each input as a .npy file of little-endian float32 ('<f4') in C order, any shape
(0-d and zero-length axes included), format 1.0 to 3.0. The header is checked in full
before the data is allocated: other element types, Fortran order, a bad header, short
data or more than max_elements elements fail the input with a clear error, and the run
goes on. A folder walk takes *.npy files. The chain holds array stages (scale, add, sum,
min, max, and kernel on a GPU) and may end with save format=npy; pixel stages refuse
arrays. On a GPU run the array stages run on the device, with the CPU's bits; an array
without elements, or too large for a device slot, runs on the CPU. The report gives each
input's shape.`,
	Params: []ParamSpec{
		{Name: "max_elements", Kind: Int, Default: int64(DefaultMaxElements), Range: &Range{Min: 1, Max: 1 << 40},
			Help: "refuse arrays with more elements than this"},
	},
	NewLoader: func(p Params) (*Loader, error) { return &Loader{MaxElements: p.Int("max_elements")}, nil },
}
