package folderrun

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lock and the journal are this package's: no other Go file of the module takes the
// flock or spells the names of the lock's note or of the journal, so that every run into a
// folder gets them from here.
func TestLifecycleNamesStayHere(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"Flock", `"` + RunInfoName + `"`, `.journal"`}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (p == here || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go"):
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, w := range words {
			if strings.Contains(string(b), w) {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s spells %s: the lock and the journal belong to pipeline/folderrun", rel, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
