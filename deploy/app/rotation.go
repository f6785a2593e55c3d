package app

import "encoding/hex"

// olderRPCTokens are the inter-tier tokens derived from the older masters of POSTMILL_SECRET_KEY. The core's
// RPC server admits them beside rpcToken, so that while a key rotation is rolled out process by process, a
// caller whose primary is still the old master (or already the new one) keeps reaching the core.
func (a *App) olderRPCTokens() []string {
	keys := a.keyring.DeriveAll("rpc-token")
	out := make([]string, 0, len(keys)-1)
	for _, k := range keys[1:] {
		out = append(out, hex.EncodeToString(k))
	}
	return out
}
