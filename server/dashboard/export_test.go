package dashboard

// testCost is what this package's tests spend on a password hash. They set passwords
// and sign in hundreds of times: at productionCost the hashing was two thirds of their
// CPU. A hash records its cost and is checked at it, so a cheaper one goes through the
// same code; TestPasswordHashes checks productionCost itself.
var testCost = argonCost{time: 1, memory: 64, threads: 1}

func init() { passwordCost = testCost }
