package recovery

import (
	"os"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// FuzzRecover damages the active segment of fixture F (byte flips,
// truncations, zero ranges, garbage appended), runs the repair and checks:
// no panic, every remaining batch validates and the directory opens as
// clean, and no batch that ended before the damage position is dropped.
func FuzzRecover(f *testing.F) {
	f.Add(uint8(0), uint32(100), uint16(1), byte(0xff))
	f.Add(uint8(1), uint32(9000), uint16(0), byte(0))
	f.Add(uint8(2), uint32(4096), uint16(4096), byte(0))
	f.Add(uint8(3), uint32(0), uint16(300), byte(7))
	f.Add(uint8(0), uint32(12), uint16(4), byte(0x80))
	f.Fuzz(func(t *testing.T, kind uint8, pos uint32, n uint16, val byte) {
		dir := fixture(t)
		path := segPath(dir, 600, filenames.Log)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p := int64(pos) % int64(len(orig))
		b := append([]byte(nil), orig...)
		switch kind % 4 {
		case 0: // flip bytes
			for i := p; i < min(int64(len(b)), p+int64(n%64)+1); i++ {
				b[i] ^= val | 1
			}
		case 1: // truncate
			b = b[:p]
		case 2: // zero a range
			clear(b[p:min(int64(len(b)), p+int64(n))])
		case 3: // append garbage
			p = int64(len(b))
			for i := 0; i < int(n%2048); i++ {
				b = append(b, val+byte(i*31))
			}
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		// The batches wholly before the damage must survive.
		var keep int64
		for _, bp := range batchesOfBytes(orig) {
			if bp.pos+int64(bp.size) <= p {
				keep = bp.pos + int64(bp.size)
			}
		}
		r, err := Run(dir, unclean(600))
		if err != nil {
			t.Fatal(err)
		}
		checkLoadable(t, dir)
		size := int64(0) // a segment whose first batch is damaged may be dropped whole
		if st, err := os.Stat(path); err == nil {
			size = st.Size()
		}
		if size < keep || r.LogEndOffset < 600 {
			t.Fatalf("segment cut to %d, below the damage-free prefix %d (report %+v)", size, keep, r.Truncation)
		}
	})
}

// FuzzRecoveryPointPosition damages segment 300 of fixture F and locates
// a recovery point past the damage: no panic, a position inside the data,
// never before the end of the valid prefix, and on undamaged data the
// position of the batch holding the recovery point.
func FuzzRecoveryPointPosition(f *testing.F) {
	f.Add(uint32(5000), uint16(3), byte(0xff), uint16(290))
	f.Add(uint32(0), uint16(0), byte(0), uint16(600))
	f.Add(uint32(40000), uint16(5000), byte(2), uint16(450))
	f.Fuzz(func(t *testing.T, pos uint32, n uint16, val byte, rp uint16) {
		dir := fixture(t)
		orig, err := os.ReadFile(segPath(dir, 300, filenames.Log))
		if err != nil {
			t.Fatal(err)
		}
		target := 300 + int64(rp)%400
		b := append([]byte(nil), orig...)
		p := int64(pos) % int64(len(b))
		for i := p; i < min(int64(len(b)), p+int64(n%4096)); i++ {
			b[i] ^= val
		}
		r := scanSegment(b, 300, nil)
		got := recoveryPointPosition(b, r.validEnd, target)
		if got < 0 || got > int64(len(b)) || (got < r.validEnd && r.lastOffset >= 0 && r.lastOffset < target) {
			t.Fatalf("position %d (valid prefix %d, last offset %d, data %d bytes)", got, r.validEnd, r.lastOffset, len(b))
		}
		if r.fail == failNone {
			want := r.validEnd
			for _, bp := range batchesOfBytes(b) {
				if bp.last >= target {
					want = bp.pos
					break
				}
			}
			if got != want {
				t.Fatalf("undamaged: position %d, want %d", got, want)
			}
		}
	})
}
