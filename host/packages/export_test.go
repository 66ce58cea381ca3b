package packages

// ReadableDir lets tests stand in for a directory root can read.
var ReadableDir = &readableDir

// HostPlatform is this machine's artifact key.
var HostPlatform = hostPlatform
