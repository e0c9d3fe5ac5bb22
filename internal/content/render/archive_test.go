package render_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"slices"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

type file struct{ name, content string }

func tarOf(t testing.TB, files ...file) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const (
	cmA = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	cmB = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
)

func TestUnpack(t *testing.T) {
	dir := []file{{"manifests/README.md", "not a manifest"}, {"manifests/a.yaml", cmA}, {"manifests/.hidden.yaml", "junk: ["}, {"manifests/sub/b.yml", cmB}}
	tests := []struct {
		name    string
		in      []byte
		max     int64
		want    []string
		wantErr string
	}{
		{name: "plain YAML passes through", in: []byte(cmA + "---\n" + cmB), want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "tar of a directory", in: tarOf(t, dir...), want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "tgz of a directory", in: gzipOf(t, tarOf(t, dir...)), want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "gzip of YAML", in: gzipOf(t, []byte(cmA)), want: []string{"ConfigMap/a"}},
		{name: "a tar with no manifest", in: tarOf(t, file{"README.md", "x"}), wantErr: "holds no .yaml, .yml or .json file"},
		{name: "a gzip that expands past the limit", in: gzipOf(t, bytes.Repeat([]byte("#"), 4096)), max: 1024, wantErr: "larger than the limit"},
		{name: "a tar past the limit", in: tarOf(t, file{"a.yaml", cmA}, file{"b.yaml", cmB}), max: int64(len(cmA)) + 10, wantErr: "larger than the limit"},
		{name: "a broken gzip", in: []byte{0x1f, 0x8b, 0, 0}, wantErr: "reading gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			unpacked, err := render.Unpack(tt.in, tt.max)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			objs, err := render.Raw(unpacked)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ids(objs)).To(Equal(tt.want))
		})
	}
}

// Unpack takes bytes a module team chose: whatever they are, it must not
// panic nor give more than the limit.
func FuzzUnpack(f *testing.F) {
	f.Add([]byte(cmA))
	f.Add(tarOf(f, file{"a.yaml", cmA}, file{"b.txt", "x"}))
	f.Add(gzipOf(f, tarOf(f, file{"a.yaml", cmA})))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 16
		out, err := render.Unpack(data, limit)
		if err == nil && len(out) > limit && len(out) != len(data) {
			t.Fatalf("unpacked %d bytes past the limit %d", len(out), limit)
		}
	})
}

// PackChart lays a chart out as helm package does, in a stable order, and
// leaves out dot directories; Helm loads what it wrote.
func TestPackChart(t *testing.T) {
	fsys := fstest.MapFS{
		"src/chart/Chart.yaml":            {Data: []byte("apiVersion: v2\nname: shop\nversion: 1.0.0\n")},
		"src/chart/values.yaml":           {Data: []byte("greeting: hello\n")},
		"src/chart/templates/cm.yaml":     {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\ndata:\n  greeting: {{ .Values.greeting }}\n")},
		"src/chart/.git/HEAD":             {Data: []byte("ref: main\n")},
		"src/chart/templates/.hidden.txt": {Data: []byte("kept: a dot file, not a dot directory\n")},
	}
	first, err := render.PackChart(fsys, "src/chart", "shop")
	if err != nil {
		t.Fatal(err)
	}
	second, err := render.PackChart(fsys, "src/chart", "shop")
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("the same chart packed twice differs (err %v)", err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	want := []string{"shop/Chart.yaml", "shop/templates/.hidden.txt", "shop/templates/cm.yaml", "shop/values.yaml"}
	if !slices.Equal(names, want) {
		t.Errorf("packed %v, want %v", names, want)
	}
	chart, err := loader.LoadArchive(bytes.NewReader(first))
	if err != nil || chart.Name() != "shop" || len(chart.Templates) != 2 {
		t.Errorf("Helm loads the package: chart %v, err %v", chart, err)
	}
}
