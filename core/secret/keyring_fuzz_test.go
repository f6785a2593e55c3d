package secret

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzOpen feeds Open what a stored column may hold after corruption or tampering, and checks the promises
// of sealing around it. On any bytes Open either fails with ErrOpen and no plaintext, or the value was
// sealed under a master on the keyring: changing any byte of it makes it fail, a keyring without that master
// cannot open it, and Reseal agrees with Open. A sealed value opens to the same plaintext (also after a
// rotation and a Reseal to the new primary), and to nothing with other associated data, with one byte
// changed, or cut short.
func FuzzOpen(f *testing.F) {
	old := MustKeyring(f, masterOld)
	rotated := MustKeyring(f, masterNew, masterOld)
	onlyNew := MustKeyring(f, masterNew)
	genuine, err := old.Seal([]byte("JBSWY3DPEHPK3PXP"), []byte("user-1"))
	if err != nil {
		f.Fatal(err)
	}
	header := genuine[:headerLen]
	flipped := bytes.Clone(genuine)
	flipped[len(flipped)-1] ^= 0x80
	for _, seed := range []struct{ raw, plain, aad []byte }{
		{genuine, []byte("JBSWY3DPEHPK3PXP"), []byte("user-1")},
		{flipped, []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI"), []byte("domain-0190a3c4")},
		{genuine[:headerLen+15], []byte("whsec_0123456789"), nil},
		{append(bytes.Clone(header), make([]byte, 16)...), nil, nil},
		{append([]byte{2}, genuine[1:]...), []byte{0}, []byte{0}},
		{nil, []byte(""), []byte("user-1")},
		{[]byte{sealVersion}, bytes.Repeat([]byte("x"), 300), []byte("postmill tracking v1")},
	} {
		f.Add(seed.raw, seed.plain, seed.aad, uint16(7), byte(1))
	}
	f.Fuzz(func(t *testing.T, raw, plain, aad []byte, pos uint16, mask byte) {
		if mask == 0 {
			mask = 1
		}
		got, err := rotated.Open(raw, aad)
		resealed, _, rerr := rotated.Reseal(raw, aad)
		if err != nil {
			if !errors.Is(err, ErrOpen) || got != nil {
				t.Fatalf("Open(%x) = %x, %v; want nil, ErrOpen", raw, got, err)
			}
			if !errors.Is(rerr, ErrOpen) || resealed != nil {
				t.Fatalf("Open refused %x but Reseal gave %x, %v", raw, resealed, rerr)
			}
		} else {
			// Only a value sealed under one of the masters gets here: it is authenticated, whole.
			i := int(pos) % len(raw)
			tampered := bytes.Clone(raw)
			tampered[i] ^= mask
			if _, err := rotated.Open(tampered, aad); !errors.Is(err, ErrOpen) {
				t.Fatalf("%x opened with byte %d changed", raw, i)
			}
			if _, err := MustKeyring(t, []byte("a third master secret, 32 bytes")).Open(raw, aad); !errors.Is(err, ErrOpen) {
				t.Fatalf("%x opened on a keyring without its master", raw)
			}
			if rerr != nil || !rotated.SealedByPrimary(resealed) {
				t.Fatalf("Open accepted %x but Reseal gave %x, %v", raw, resealed, rerr)
			}
			if again, err := onlyNew.Open(resealed, aad); err != nil || !bytes.Equal(again, got) {
				t.Fatalf("resealed %x opens to %x, %v; want %x", raw, again, err, got)
			}
		}

		sealed, err := old.Seal(plain, aad)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != headerLen+len(plain)+16 || sealed[0] != sealVersion || !bytes.Equal(sealed[1:1+keyIDLen], header[1:1+keyIDLen]) {
			t.Fatalf("Seal(%x) = %x: not version | key id | nonce | ciphertext+tag", plain, sealed)
		}
		for _, k := range []*Keyring{old, rotated} {
			if got, err := k.Open(sealed, aad); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Seal(%x) opens to %x, %v", plain, got, err)
			}
		}
		mustNotOpen := func(what string, k *Keyring, sealed, aad []byte) {
			t.Helper()
			if got, err := k.Open(sealed, aad); !errors.Is(err, ErrOpen) || got != nil {
				t.Fatalf("%s: Open = %x, %v; want ErrOpen", what, got, err)
			}
		}
		mustNotOpen("master not on the keyring", onlyNew, sealed, aad)
		mustNotOpen("other associated data", rotated, sealed, append(bytes.Clone(aad), 0))
		if len(aad) > 0 {
			mustNotOpen("associated data cut", rotated, sealed, aad[:len(aad)-1])
		}
		i := int(pos) % len(sealed)
		tampered := bytes.Clone(sealed)
		tampered[i] ^= mask
		mustNotOpen("a byte changed", rotated, tampered, aad)
		mustNotOpen("cut short", rotated, sealed[:i], aad)

		out, changed, err := rotated.Reseal(sealed, aad)
		if err != nil || !changed || !rotated.SealedByPrimary(out) || rotated.SealedByPrimary(sealed) {
			t.Fatalf("Reseal(%x) = %x, %v, %v", sealed, out, changed, err)
		}
		if got, err := onlyNew.Open(out, aad); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("resealed value opens to %x, %v; want %x", got, err, plain)
		}
		if again, changed, err := rotated.Reseal(out, aad); err != nil || changed || !bytes.Equal(again, out) {
			t.Fatalf("resealing twice: %x, %v, %v", again, changed, err)
		}
	})
}
