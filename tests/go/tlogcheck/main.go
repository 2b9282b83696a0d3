// tlogcheck reads a served EvalBook transparency log with Go's own sumdb packages
// (golang.org/x/mod/sumdb/note and sumdb/tlog, Debian's golang-golang-x-mod-dev): it opens
// the checkpoint with the log's verifier key, recomputes the tree hash from the C2SP tiles
// (height 8; tlog.TileHashReader checks every tile it reads against the tree), proves every
// entry (or a sample) with tlog.ProveRecord/CheckRecord, and, given an older size and root,
// proves the trees consistent with tlog.ProveTree/CheckTree.
//
// With @SIZE ROOT instead, it reads the tree of an earlier checkpoint of that size and root
// from the served tiles (the partial tiles of that size, as a client of that checkpoint
// would), after checking the served checkpoint's signature.
//
// Usage: tlogcheck BASE_URL VKEY [OLD_SIZE OLD_ROOT_BASE64 | @SIZE ROOT_BASE64]
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

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var base string

func get(path string) []byte {
	resp, err := http.Get(base + path)
	if err != nil {
		fail("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		fail("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return data
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// index writes a tile index as C2SP tlog-tiles does: groups of three digits, "x" before all
// but the last.
func index(n int64) string {
	digits := fmt.Sprintf("%03d", n)
	for len(digits)%3 != 0 {
		digits = "0" + digits
	}
	var groups []string
	for i := 0; i < len(digits); i += 3 {
		groups = append(groups, digits[i:i+3])
	}
	for i := 0; i < len(groups)-1; i++ {
		groups[i] = "x" + groups[i]
	}
	return strings.Join(groups, "/")
}

func tilePath(kind string, n int64, w int) string {
	path := "/log/tile/" + kind + "/" + index(n)
	if w != 256 {
		path += fmt.Sprintf(".p/%d", w)
	}
	return path
}

type reader struct{}

func (reader) Height() int { return 8 }

func (reader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		out[i] = get(tilePath(strconv.Itoa(t.L), t.N, t.W))
	}
	return out, nil
}

func (reader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func main() {
	if len(os.Args) != 3 && len(os.Args) != 5 {
		fail("usage: tlogcheck BASE_URL VKEY [OLD_SIZE OLD_ROOT]")
	}
	base = os.Args[1]
	verifier, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fail("verifier key: %v", err)
	}
	msg, err := note.Open(get("/log/checkpoint"), note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	lines := strings.Split(msg.Text, "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("size: %v", err)
	}
	rootBytes, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(rootBytes) != 32 {
		fail("root: %v", err)
	}
	var root tlog.Hash
	copy(root[:], rootBytes)
	earlier := len(os.Args) == 5 && strings.HasPrefix(os.Args[3], "@")
	if earlier {
		size, err = strconv.ParseInt(os.Args[3][1:], 10, 64)
		if err != nil {
			fail("earlier size: %v", err)
		}
		rootBytes, err = base64.StdEncoding.DecodeString(os.Args[4])
		if err != nil || len(rootBytes) != 32 {
			fail("earlier root: %v", err)
		}
		copy(root[:], rootBytes)
	}
	hashes := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, reader{})
	computed, err := tlog.TreeHash(size, hashes)
	if err != nil || computed != root {
		fail("tree hash: %v (%v, want %v)", err, computed, root)
	}
	var entries [][]byte
	for n := int64(0); n*256 < size; n++ {
		w := int(size - n*256)
		if w > 256 {
			w = 256
		}
		data := get(tilePath("entries", n, w))
		for len(data) > 0 {
			length := int(binary.BigEndian.Uint16(data[:2]))
			entries = append(entries, data[2:2+length])
			data = data[2+length:]
		}
	}
	if int64(len(entries)) != size {
		fail("%d entries in the bundles, the checkpoint says %d", len(entries), size)
	}
	step := int64(1)
	if size > 3000 {
		step = size / 1000
	}
	proven := 0
	for i := int64(0); i < size; i += step {
		proof, err := tlog.ProveRecord(size, i, hashes)
		if err != nil {
			fail("prove %d: %v", i, err)
		}
		if err := tlog.CheckRecord(proof, size, root, i, tlog.RecordHash(entries[i])); err != nil {
			fail("check %d: %v", i, err)
		}
		proven++
	}
	if len(os.Args) == 5 && !earlier {
		oldSize, _ := strconv.ParseInt(os.Args[3], 10, 64)
		oldBytes, _ := base64.StdEncoding.DecodeString(os.Args[4])
		var old tlog.Hash
		copy(old[:], oldBytes)
		proof, err := tlog.ProveTree(size, oldSize, hashes)
		if err != nil {
			fail("prove tree: %v", err)
		}
		if err := tlog.CheckTree(proof, size, root, oldSize, old); err != nil {
			fail("check tree: %v", err)
		}
	}
	fmt.Printf("ok size=%d proven=%d\n", size, proven)
}
