// Package cluster tests the Locker over masters that are Redis Clusters:
// three independent clusters of three shard masters each (nine
// redis-server processes started by lab.StartClusters), reached through
// *redis.ClusterClient. It checks mutual exclusion, that a failed
// acquisition or a crashed holder leaves no key behind on any shard, fence
// order, that a stalled shard makes only the keys in its slots see its
// cluster as slow, and the plain path (Options.ViaClient) on clusters.
package cluster
