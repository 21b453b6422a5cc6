// Command httptiles is an independent Go client of a running `ledger serve`: it fetches the
// checkpoint and C2SP tiles over HTTP and checks them with golang.org/x/mod/sumdb only.
//
//  1. GET /checkpoint; note.Open with the verifier key given as the second argument;
//  2. tlog.TileHashReader over HTTP tiles (it authenticates every tile against the signed root);
//  3. every entry of every entry tile: its RFC 6962 record hash equals the tree's stored hash,
//     and tlog.ProveRecord + tlog.CheckRecord pass for it;
//  4. tlog.ProveTree + tlog.CheckTree from every 97th size to the full size.
//
// Usage: httptiles URL VKEY. Prints "ok ..." lines; any failure: one stderr line, exit 1.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var client = &http.Client{Timeout: 30 * time.Second}

func get(url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 32<<20))
}

// httpTiles fetches tiles over HTTP and keeps them in memory; TileHashReader still authenticates
// every tile against the signed root each time it reads one.
type httpTiles struct {
	base  string
	cache map[string][]byte
}

func (h httpTiles) Height() int { return 8 }

func c2spPath(t tlog.Tile) string {
	return "tile/" + strings.TrimPrefix(t.Path(), "tile/8/")
}

func (h httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		p := c2spPath(t)
		data, ok := h.cache[p]
		if !ok {
			var err error
			data, err = get(h.base + "/" + p)
			if err != nil {
				return nil, err
			}
			h.cache[p] = data
		}
		out[i] = data
	}
	return out, nil
}

func (h httpTiles) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "httptiles: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: httptiles URL VKEY")
		os.Exit(2)
	}
	base := strings.TrimSuffix(os.Args[1], "/")
	verifier, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "httptiles: bad vkey:", err)
		os.Exit(2)
	}
	raw, err := get(base + "/checkpoint")
	if err != nil {
		fail("%v", err)
	}
	n, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint note: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		fail("malformed checkpoint")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	rootBytes, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(rootBytes) != tlog.HashSize {
		fail("checkpoint root")
	}
	var tree tlog.Tree
	tree.N = size
	copy(tree.Hash[:], rootBytes)
	fmt.Printf("ok note %s size %d\n", lines[0], size)

	reader := tlog.TileHashReader(tree, httpTiles{base, map[string][]byte{}})
	root, err := tlog.TreeHash(size, reader)
	if err != nil || root != tree.Hash {
		fail("tiles do not give the signed root: %v", err)
	}
	fmt.Printf("ok tiles authenticate root of size %d\n", size)

	var count int64
	for t := int64(0); t<<8 < size; t++ {
		w := size - t<<8
		if w > 256 {
			w = 256
		}
		tile := tlog.Tile{H: 8, L: 0, N: t, W: int(w)}
		path := strings.Replace(c2spPath(tile), "tile/0/", "tile/entries/", 1)
		data, err := get(base + "/" + path)
		if err != nil {
			fail("%v", err)
		}
		for k := int64(0); k < w; k++ {
			if len(data) < 2 {
				fail("%s truncated", path)
			}
			l := int(binary.BigEndian.Uint16(data))
			if len(data) < 2+l {
				fail("%s truncated", path)
			}
			entry := data[2 : 2+l]
			data = data[2+l:]
			index := t<<8 + k
			leaf := tlog.RecordHash(entry)
			stored, err := reader.ReadHashes([]int64{tlog.StoredHashIndex(0, index)})
			if err != nil || stored[0] != leaf {
				fail("entry %d: record hash differs from the tiles (%v)", index, err)
			}
			proof, err := tlog.ProveRecord(size, index, reader)
			if err != nil {
				fail("prove record %d: %v", index, err)
			}
			if err := tlog.CheckRecord(proof, size, tree.Hash, index, leaf); err != nil {
				fail("check record %d: %v", index, err)
			}
			count++
		}
		if len(data) != 0 {
			fail("%s has trailing bytes", path)
		}
	}
	fmt.Printf("ok entries %d\n", count)

	checked := 0
	for old := int64(1); old < size; old += 97 {
		oldHash, err := tlog.TreeHash(old, reader)
		if err != nil {
			fail("tree hash %d: %v", old, err)
		}
		proof, err := tlog.ProveTree(size, old, reader)
		if err != nil {
			fail("prove tree %d: %v", old, err)
		}
		if err := tlog.CheckTree(proof, size, tree.Hash, old, oldHash); err != nil {
			fail("check tree %d -> %d: %v", old, size, err)
		}
		checked++
	}
	fmt.Printf("ok consistency %d\n", checked)
}
