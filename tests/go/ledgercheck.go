// Command ledgercheck is an independent client for the kernel ledger's log formats.
//
// It checks, with Go's golang.org/x/mod/sumdb/note and sumdb/tlog only (no ledger code):
//
//  1. the signed checkpoint note verifies under the verifier key (note.Open);
//  2. every inclusion proof (tlog.CheckRecord) and consistency proof (tlog.CheckTree) given;
//  3. the C2SP tiles in a directory, read through tlog.TileHashReader, which authenticates every
//     tile against the checkpoint's root hash; Go's own proofs from those tiles (ProveRecord,
//     ProveTree) must equal the given proofs byte for byte;
//  4. every entry bundle (tile/entries/...): each entry's RFC 6962 leaf hash equals the tiles'.
//
// Input: one JSON object on stdin (see request below). Output: "ok ..." lines on stdout; any
// failure prints one line on stderr and exits 1; bad input exits 2.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Index    int64    `json:"index"`
	TreeSize int64    `json:"tree_size"`
	LeafHash string   `json:"leaf_hash"`
	Hashes   []string `json:"hashes"`
}

type consistency struct {
	OldSize int64    `json:"old_size"`
	NewSize int64    `json:"new_size"`
	OldRoot string   `json:"old_root"`
	Hashes  []string `json:"hashes"`
}

type request struct {
	Vkey        string        `json:"vkey"`
	Checkpoint  string        `json:"checkpoint"`
	TilesDir    string        `json:"tiles_dir"`
	Inclusion   []inclusion   `json:"inclusion"`
	Consistency []consistency `json:"consistency"`
}

// dirTiles reads C2SP tiles (tile/<L>/<N>[.p/<W>]) from a directory: Go's Tile.Path without the
// height element.
type dirTiles struct{ dir string }

func (d dirTiles) Height() int { return 8 }

func c2spPath(t tlog.Tile) string {
	return "tile/" + strings.TrimPrefix(t.Path(), "tile/8/")
}

func (d dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(c2spPath(t))))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (d dirTiles) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func hash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		return h, fmt.Errorf("bad hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

func hashes(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, s := range list {
		h, err := hash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// parseCheckpoint reads the C2SP tlog-checkpoint body: origin, size, base64 root.
func parseCheckpoint(text string) (string, tlog.Tree, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || lines[0] == "" {
		return "", tlog.Tree{}, errors.New("malformed checkpoint")
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return "", tlog.Tree{}, errors.New("malformed checkpoint size")
	}
	h, err := hash(lines[2])
	if err != nil {
		return "", tlog.Tree{}, err
	}
	return lines[0], tlog.Tree{N: n, Hash: h}, nil
}

func equal(a, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkEntries(dir string, tree tlog.Tree, hr tlog.HashReader) (int64, error) {
	var count int64
	for n := int64(0); n<<8 < tree.N; n++ {
		w := tree.N - n<<8
		if w > 256 {
			w = 256
		}
		t := tlog.Tile{H: 8, L: 0, N: n, W: int(w)}
		p := strings.Replace(c2spPath(t), "tile/0/", "tile/entries/", 1)
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return count, err
		}
		indexes := make([]int64, w)
		for i := range indexes {
			indexes[i] = tlog.StoredHashIndex(0, n<<8+int64(i))
		}
		leaves, err := hr.ReadHashes(indexes)
		if err != nil {
			return count, err
		}
		for i := int64(0); i < w; i++ {
			if len(data) < 2 {
				return count, fmt.Errorf("%s: truncated", p)
			}
			size := int(binary.BigEndian.Uint16(data))
			if len(data) < 2+size {
				return count, fmt.Errorf("%s: truncated entry", p)
			}
			entry := data[2 : 2+size]
			data = data[2+size:]
			if tlog.RecordHash(entry) != leaves[i] {
				return count, fmt.Errorf("entry %d does not hash to its leaf", n<<8+i)
			}
			count++
		}
		if len(data) != 0 {
			return count, fmt.Errorf("%s: trailing bytes", p)
		}
	}
	return count, nil
}

func run(req request) error {
	v, err := note.NewVerifier(req.Vkey)
	if err != nil {
		return fmt.Errorf("vkey: %v", err)
	}
	n, err := note.Open([]byte(req.Checkpoint), note.VerifierList(v))
	if err != nil {
		return fmt.Errorf("checkpoint note: %v", err)
	}
	origin, tree, err := parseCheckpoint(n.Text)
	if err != nil {
		return err
	}
	fmt.Printf("ok note %s size %d signed by %s\n", origin, tree.N, n.Sigs[0].Name)

	var hr tlog.HashReader
	if req.TilesDir != "" {
		hr = tlog.TileHashReader(tree, dirTiles{req.TilesDir})
		th, err := tlog.TreeHash(tree.N, hr)
		if err != nil {
			return fmt.Errorf("tiles: %v", err)
		}
		if th != tree.Hash {
			return errors.New("tiles: tree hash differs from the checkpoint")
		}
		fmt.Printf("ok tiles authenticate root of size %d\n", tree.N)
	}
	for _, inc := range req.Inclusion {
		leaf, err := hash(inc.LeafHash)
		if err != nil {
			return err
		}
		proof, err := hashes(inc.Hashes)
		if err != nil {
			return err
		}
		if inc.TreeSize != tree.N {
			return fmt.Errorf("inclusion proof is for size %d, checkpoint is %d", inc.TreeSize, tree.N)
		}
		if err := tlog.CheckRecord(proof, tree.N, tree.Hash, inc.Index, leaf); err != nil {
			return fmt.Errorf("inclusion %d: %v", inc.Index, err)
		}
		if hr != nil {
			own, err := tlog.ProveRecord(tree.N, inc.Index, hr)
			if err != nil || !equal(own, proof) {
				return fmt.Errorf("inclusion %d: Go's proof from the tiles differs (%v)", inc.Index, err)
			}
		}
		fmt.Printf("ok inclusion %d\n", inc.Index)
	}
	for _, c := range req.Consistency {
		old, err := hash(c.OldRoot)
		if err != nil {
			return err
		}
		proof, err := hashes(c.Hashes)
		if err != nil {
			return err
		}
		if c.NewSize != tree.N {
			return fmt.Errorf("consistency proof is to size %d, checkpoint is %d", c.NewSize, tree.N)
		}
		if err := tlog.CheckTree(proof, tree.N, tree.Hash, c.OldSize, old); err != nil {
			return fmt.Errorf("consistency %d: %v", c.OldSize, err)
		}
		if hr != nil {
			own, err := tlog.ProveTree(tree.N, c.OldSize, hr)
			if err != nil || !equal(own, proof) {
				return fmt.Errorf("consistency %d: Go's proof from the tiles differs (%v)", c.OldSize, err)
			}
		}
		fmt.Printf("ok consistency %d %d\n", c.OldSize, tree.N)
	}
	if hr != nil {
		count, err := checkEntries(req.TilesDir, tree, hr)
		if err != nil {
			return fmt.Errorf("entries: %v", err)
		}
		fmt.Printf("ok entries %d\n", count)
	}
	return nil
}

func main() {
	var req request
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "ledgercheck: bad request:", err)
		os.Exit(2)
	}
	if err := run(req); err != nil {
		fmt.Fprintln(os.Stderr, "ledgercheck:", err)
		os.Exit(1)
	}
}
