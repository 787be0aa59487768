import hyperagent from './index.js';

export const { Agent, HttpAgent, constants } = hyperagent;
export default hyperagent;
