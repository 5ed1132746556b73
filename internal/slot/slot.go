// Package slot computes Redis Cluster hash slots, for the Locker (routing a
// key to the shard that owns it) and for the lab (which shard a test key is
// on).
package slot

import "strings"

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Of returns key's hash slot, as CLUSTER KEYSLOT does: CRC16 of the hash
// tag (the text between the first '{' and the next '}', when not empty),
// else of the whole key, modulo Count.
func Of(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % Count
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the one
// Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
