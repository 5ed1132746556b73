package redlock

// KeySlot is the Redis Cluster hash slot the Locker routes key by.
var KeySlot = keySlot
